"""The prose of the repository stands alone and stays true as the code changes.

Benchmark figures (recall, latency, percentages, before → after) go stale with every bench run, so they live in
``docs/BENCHMARKS.md`` with the command that produced them, never in the package's docstrings or comments, which
keep the one-sentence why. And a reader of the repository has only the repository: no doc, docstring or comment
may send them to a file outside it (the machine's shared folder, host notes, a reference spec's sections).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_PACKAGE = {"tests", "bench", "scripts"}

# A figure a bench run produces: recall@k or R@k followed by a number, a latency or throughput, a percentage,
# points of recall, a percentile, or a before → after pair of numbers.
BENCHMARK_FIGURE = re.compile(
    r"(?:recall|R)@\d+(?:/\d+)*\s*(?:[=:]\s*)?~?\d"
    r"|\d(?:\.\d+)?\s*(?:ms|µs|us)\b"
    r"|\d\s*(?:passages|texts|writes|queries)?/s\b"
    r"|\d(?:\.\d+)?\s*%"
    r"|\d(?:\.\d+)?\s*points?\b"
    r"|\bp(?:50|95|99)\b"
    r"|\d\s*→\s*~?\d"
)

# A pointer to something outside the repository.
OUTSIDE_REFERENCE = re.compile(
    r"\.\./shared|/work/|host-contract|booku-reference|reference-behaviour|tools-router spec|§"
    r"|(?<!docs/)\bTARGETS\.md"
)


def package_modules() -> list[Path]:
    """Every module of the package: the root's and those of each sub-package, whatever it is called."""
    packages = [d for d in ROOT.iterdir() if d.is_dir() and d.name not in NOT_PACKAGE and (d / "__init__.py").exists()]
    return sorted([*ROOT.glob("*.py"), *(p for d in packages for p in d.rglob("*.py"))])


def suite_modules() -> list[Path]:
    return sorted((ROOT / "tests").rglob("*.py"))


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of every docstring (module, class, function) and comment of ``path``."""
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                yield node.body[0].lineno, doc
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def findings(paths: list[Path], pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in paths:
        for line, text in prose(path):
            for match in pattern.finditer(text):
                context = text[max(0, match.start() - 40) : match.end() + 40].replace("\n", " ")
                found.append(f"{path.relative_to(ROOT)}:{line}: …{context}…")
    return found


def test_package_prose_carries_no_benchmark_figure() -> None:
    found = findings(package_modules(), BENCHMARK_FIGURE)
    assert not found, "benchmark figures belong in docs/BENCHMARKS.md:\n" + "\n".join(found)


def test_code_and_tests_point_only_inside_the_repository() -> None:
    found = findings(package_modules() + suite_modules(), OUTSIDE_REFERENCE)
    assert not found, "state the fact in place or in docs/:\n" + "\n".join(found)


def test_docs_point_only_inside_the_repository() -> None:
    """A reader of the repository has no shared folder and no host notes: every doc must stand alone."""
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        match = OUTSIDE_REFERENCE.search(doc.read_text(encoding="utf-8"))
        assert match is None, f"{doc.name}: {match and match.group(0)}"


@pytest.mark.parametrize(
    ("text", "figure"),
    [
        ("recall@1/5/10/25 40.1/72.5/78.6/85.6", True),
        ("MemoryBank-zh recall@5 90.7 → 92.7", True),
        ("p50 24 / p95 29 ms", True),
        ("1.7 ms p50 alone", True),
        ("about 6 points recall@5", True),
        ("96 % of the gold turns", True),
        ("60-75/s", True),
        ("``hobb*`` → hobby, hobbies", False),
        ("the 5 s budget of a host handler", False),
        ("keeps ``top_k`` results, recall@k is for benches", False),
    ],
)
def test_the_figure_pattern_tells_figures_from_prose(text: str, figure: bool) -> None:
    assert (BENCHMARK_FIGURE.search(text) is not None) is figure
