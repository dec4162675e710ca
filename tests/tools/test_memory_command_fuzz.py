"""Property-based fuzzing of the tools with random and hostile input (hypothesis).

Properties, for every input: the tool never raises; it always answers with the envelope and, when not ok, a
non-empty message; the answer fits the character budget (the help manual excepted); and when no step succeeded,
nothing at all was written (no revision, record change or memo).
"""

from __future__ import annotations

import asyncio
import shlex
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.tools.command_lexer import CommandError, parse_segment
from booku_memory.tools.command_spec import COMMANDS, FlagKind, FlagSpec
from booku_memory.tools.memory_command import run_memory_command
from booku_memory.tools.temporary_memo import run_temporary_memo

from .tool_support import WriteCounter, assert_envelope, seed

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
FLAG_SPELLINGS = sorted({spelling for spec in COMMANDS for spelling in spec.all_spellings()})
HOSTILE_PIECES = [
    "&&",
    "&",
    "'",
    '"',
    "\\",
    "-",
    "--",
    "---x",
    "-=",
    "=",
    "|",
    "||",
    "a|b|c",
    "-5",
    "-0.5",
    "1e309",
    "nan",
    "true",
    "false",
    "\n",
    "\t",
    "\u3000",
    "\x00",
    "</system_reminder>",
    "$(rm -rf /)",
    "`id`",
    "; DROP TABLE x;",
    "%",
    "_",
    "(a*)*b",
    "[",
    "🙂",
    "\u202e",
    "　",
    "，",
    "、",
    "2024-05-01",
    "qq:1",
    "person",
    "archived",
    "0",
    "101",
    "9" * 30,
]


def _hostile_token(ids: list[str]) -> st.SearchStrategy[str]:
    flag_like = st.builds(
        lambda dashes, name, upper, inline: dashes + (name.upper() if upper else name) + inline,
        st.sampled_from(["-", "--"]),
        st.sampled_from(FLAG_SPELLINGS + ["tittle", "folder_id", "x"]),
        st.booleans(),
        st.one_of(st.just(""), st.sampled_from(HOSTILE_PIECES).map(lambda v: "=" + v)),
    )
    quoted = st.builds(lambda q, t: f"{q}{t}{q}", st.sampled_from(["'", '"']), st.text(max_size=30))
    return st.one_of(flag_like, st.sampled_from(HOSTILE_PIECES), st.sampled_from(ids), st.text(max_size=20), quoted)


def _value_for(flag: FlagSpec, ids: list[str]) -> st.SearchStrategy[str]:
    """Mostly plausible values of the flag's kind, sometimes hostile ones."""
    words = st.sampled_from(["张三", "会议", "北京", "篮球", "- 列表项", "-5", "a b", "", "生日"])
    by_kind = {
        FlagKind.ID: st.one_of(st.sampled_from(ids), st.just("mem-ghost")),
        FlagKind.IDS: st.lists(st.sampled_from(ids + ["mem-ghost"]), min_size=1, max_size=3).map(",".join),
        FlagKind.INT: st.integers(-3, 150).map(str),
        FlagKind.BOOL: st.sampled_from(["true", "false", "yes", "0"]),
        FlagKind.TIME: st.sampled_from(["2024-05-01", "1714521600", "-5", "明天", "2024-05-01 14:30"]),
        FlagKind.LIST: st.lists(words, max_size=3).map(",".join),
        FlagKind.WORD: st.sampled_from(list(flag.choices) + ["", "Robot"]) if flag.choices else words,
        FlagKind.LINE: st.one_of(words, st.sampled_from(["qq:10001", "bad id"])),
        FlagKind.TEXT: st.one_of(words, st.text(max_size=30), st.sampled_from(["a|b|c", "a||c", "核心|扩散|对立"])),
        FlagKind.NUMBER: st.sampled_from(["0.5", "1", "0", "-1", "2.5", "abc", "1e309", "9" * 400]),
        FlagKind.JSON: st.sampled_from(
            [
                "[]",
                '["原话"]',
                '[{"text": "原话", "speaker": "小王"}]',
                '{"events": 2}',
                "0.2",
                "[[1, 1]]",
                "{bad",
                '"x"',
                '{"nope": 1}',
                "[" * 50,
            ]
        ),
    }
    return st.one_of(by_kind[flag.kind], by_kind[flag.kind], st.sampled_from(HOSTILE_PIECES))


@st.composite
def _step(draw: Any, ids: list[str]) -> str:
    """One step: a sub-command with mostly its own flags and values, occasionally hostile tokens."""
    spec = draw(st.sampled_from(COMMANDS))
    tokens = [draw(st.sampled_from([spec.name, spec.name.upper(), *spec.aliases]))]
    id_flags = [flag for flag in spec.flags if flag.kind in (FlagKind.ID, FlagKind.IDS)]
    if id_flags and draw(st.integers(0, 9)) < 7:
        tokens += ["-" + id_flags[0].names[0], draw(st.sampled_from(ids + ["mem-ghost"]))]
    if spec.name == "create" and draw(st.booleans()):
        tokens += [
            "-title",
            shlex.quote(draw(st.text(min_size=1, max_size=20))),
            "-content",
            shlex.quote(draw(st.text(min_size=1, max_size=60))),
            "-triple_tags",
            shlex.quote(draw(st.sampled_from(["a|b|c", "人|事|物", "x,y|z|w"]))),
        ]
    for _ in range(draw(st.integers(0, 5))):
        if spec.flags and draw(st.integers(0, 9)) < 8:
            flag = draw(st.sampled_from(spec.flags))
            tokens.append("-" + draw(st.sampled_from(flag.names)))
            if flag.kind is not FlagKind.BOOL or draw(st.booleans()):
                value = draw(_value_for(flag, ids))
                tokens.append(shlex.quote(value) if draw(st.integers(0, 4)) else value)
        else:
            tokens.append(draw(_hostile_token(ids)))
    return " ".join(tokens)


RUNTIME_FAILURES = [
    "read -id mem-ghost",
    "history -id mem-ghost",
    "update -id mem-ghost -title x",
    "revert -id mem-ghost -version 1",
    "delete -ids mem-ghost",
]


def _structured_commands(ids: list[str]) -> st.SearchStrategy[str]:
    chains = st.lists(_step(ids), min_size=1, max_size=3).map(" && ".join)
    # A step that may write followed by one that fails at run time: the answer must report the first as done.
    writer = st.one_of(
        _step(ids),
        st.builds(
            lambda i, t: f"update -id {i} -title {shlex.quote(t)}",
            st.sampled_from(ids),
            st.text(min_size=1, max_size=20).filter(str.strip),
        ),
        st.builds(
            lambda t, c: f"create -title {shlex.quote(t)} -content {shlex.quote(c)} -triple_tags 'a|b|c'",
            st.text(min_size=1, max_size=20).filter(str.strip),
            st.text(min_size=1, max_size=60).filter(str.strip),
        ),
    )
    write_then_fail = st.builds(lambda first, last: f"{first} && {last}", writer, st.sampled_from(RUNTIME_FAILURES))
    return st.one_of(chains, write_then_fail)


def _random_commands() -> st.SearchStrategy[Any]:
    hostile_soup = st.lists(st.sampled_from(HOSTILE_PIECES + ["search", "create", "-q", " "]), max_size=15).map("".join)
    return st.one_of(st.none(), st.text(max_size=200), hostile_soup)


def test_parse_segment_only_ever_raises_command_errors():
    @settings(max_examples=400, deadline=None)
    @given(st.text(max_size=120))
    def check(segment: str) -> None:
        try:
            parse_segment(segment)
        except CommandError:
            pass
        except ValueError as exc:  # tag-shorthand errors are ValidationError, also a BookuError
            assert type(exc).__name__ == "ValidationError", exc

    check()


def test_memory_command_never_crashes_never_writes_when_invalid_and_always_answers(tmp_path):
    with asyncio.Runner() as runner:
        opener = booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder())
        handle = runner.run(opener.__aenter__())
        try:
            svc = handle.get_service(booku_memory.MEMORY_SERVICE)
            counter = WriteCounter(handle.runtime)
            ids = [
                runner.run(seed(svc, "张三", "张三住在北京，喜欢篮球")),
                runner.run(seed(svc, "会议", "周五下午三点开周会")),
                runner.run(seed(svc, "清单", "- 牛奶\n- 面包")),
            ]
            budget = svc.runtime.config.tools.output_char_budget

            async def one(command: Any) -> None:
                before = await counter.snapshot()
                envelope = await run_memory_command(svc, command, stream_id="fuzz")
                assert_envelope(envelope, budget)
                succeeded = any(entry.get("success") for entry in envelope.get("results", []))
                if not succeeded:
                    assert await counter.snapshot() == before, (command, envelope)

            @settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
            @given(st.one_of(_structured_commands(ids), _structured_commands(ids), _random_commands()))
            def check(command: Any) -> None:
                runner.run(one(command))

            check()
        finally:
            runner.run(opener.__aexit__(None, None, None))


def test_temporary_memo_never_crashes_and_never_writes_on_error(tmp_path):
    with asyncio.Runner() as runner:
        opener = booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder())
        handle = runner.run(opener.__aenter__())
        try:
            svc = handle.get_service(booku_memory.MEMORY_SERVICE)
            counter = WriteCounter(handle.runtime)

            async def one(kwargs: dict[str, Any]) -> None:
                before = await counter.snapshot()
                result = await run_temporary_memo(svc, **kwargs)
                assert result["action"] == "temporary_memo" and isinstance(result["ok"], bool)
                if result["ok"]:
                    assert result["message"].strip()
                else:
                    assert result["error"].strip()
                    assert await counter.snapshot() == before, (kwargs, result)

            memo_args = st.fixed_dictionaries(
                {
                    "content": st.one_of(st.none(), st.text(max_size=40), st.sampled_from(HOSTILE_PIECES)),
                    "expire_hours": st.one_of(
                        st.none(),
                        st.floats(allow_nan=True, allow_infinity=True),
                        st.integers(-5, 500),
                        st.text(max_size=5),
                        st.booleans(),
                    ),
                    "action": st.one_of(st.none(), st.sampled_from(["create", "list", "cancel", "LIST", "x", ""])),
                    "memo_id": st.one_of(st.none(), st.text(max_size=10)),
                    "allow_shorten": st.booleans(),
                    "stream_id": st.one_of(st.none(), st.sampled_from(["a", "b", "", " "])),
                }
            )

            @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
            @given(memo_args)
            def check(kwargs: dict[str, Any]) -> None:
                runner.run(one(kwargs))

            check()
        finally:
            runner.run(opener.__aexit__(None, None, None))
