"""Exposure of the running dashboard (``python -m booku_memory serve`` as a subprocess on 127.0.0.1), measured from
outside like an attacker on the machine would see it:

1. unauthenticated 300 MB bodies (text/plain, JSON, multipart upload) and authenticated ones (JSON, multipart):
   what the server answers, how many bytes the client got to send before that answer (a few MiB always fit in the
   socket buffers), and how far the server's resident memory rose above where it was;
2. a flood of wrong ``X-API-Key`` guesses from many connections at once: guesses answered per second, and how long
   the right key takes meanwhile.

Usage: ``.venv/bin/python bench/exposure.py [--body-mb 300] [--flood-seconds 10] [--connections 50]``
Prints a Markdown table. The server uses no embedding model (``[embedding] provider = "none"``): nothing here
depends on vectors.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

KEY = "bench-exposure-key-0123456789abcdef"
CONFIG = """[embedding]
provider = "none"

[maintenance]
enabled = false

[startup_ingest]
enabled = false
"""
CHUNK = b"a" * (1024 * 1024)
MULTIPART_HEAD = (
    b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.md"\r\nContent-Type: text/markdown\r\n\r\n'
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rss_kib(pid: int) -> int:
    """The server process's resident memory (VmRSS) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class RssWatch:
    """The highest VmRSS of a process while the ``with`` block runs, sampled every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before = rss_kib(pid)
        self.peak = self.before
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, rss_kib(self.pid))

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.5)
        self._done.set()
        self._thread.join()


def stream_body(port: int, path: str, headers: dict[str, str], total_mb: int, head: bytes = b"") -> tuple[str, int]:
    """POST ``total_mb`` MiB over a raw socket, stopping when the server answers; returns (status line, bytes sent)."""
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Content-Length: {total_mb * len(CHUNK) + len(head)}",
        *(f"{name}: {value}" for name, value in headers.items()),
        "",
        "",
    ]
    sent = 0
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall("\r\n".join(lines).encode("latin-1") + head)
        conn.setblocking(False)
        answer = b""
        for _ in range(total_mb):
            try:
                answer += conn.recv(4096)
            except BlockingIOError:
                pass
            if answer:
                break
            try:
                conn.setblocking(True)
                conn.settimeout(5)
                conn.sendall(CHUNK)
                sent += len(CHUNK)
                conn.setblocking(False)
            except (TimeoutError, BrokenPipeError, ConnectionResetError):
                break
        conn.setblocking(True)
        conn.settimeout(30)
        try:
            while b"\r\n" not in answer:
                piece = conn.recv(4096)
                if not piece:
                    break
                answer += piece
        except (TimeoutError, ConnectionResetError):
            pass
    return answer.split(b"\r\n", 1)[0].decode("latin-1") or "(connection closed)", sent


async def flood(port: int, seconds: float, connections: int) -> tuple[float, float, int]:
    """Wrong-key guesses per second over ``seconds``, the right key's latency during the flood, its status."""
    base = f"http://127.0.0.1:{port}"
    answered = 0
    stop = time.monotonic() + seconds

    async def guesser(client: httpx.AsyncClient) -> None:
        nonlocal answered
        while time.monotonic() < stop:
            try:
                await client.get("/api/status", headers={"X-API-Key": f"guess-{answered:032d}"})
            except httpx.HTTPError:
                continue
            answered += 1

    limits = httpx.Limits(max_connections=connections + 2)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as client:
        tasks = [asyncio.create_task(guesser(client)) for _ in range(connections)]
        await asyncio.sleep(seconds / 2)
        started = time.monotonic()
        right = await client.get("/api/status", headers={"X-API-Key": KEY})
        right_latency = time.monotonic() - started
        await asyncio.sleep(max(0.0, stop - time.monotonic()))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return answered / seconds, right_latency, right.status_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--body-mb", type=int, default=300)
    parser.add_argument("--flood-seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="booku-exposure-"))
    (root / "booku.toml").write_text(CONFIG, encoding="utf-8")
    port = free_port()
    env = {**os.environ, "BOOKU_DASHBOARD_API_KEY": KEY}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "booku_memory",
            "serve",
            "--data-dir",
            str(root / "data"),
            "--config",
            str(root / "booku.toml"),
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/login", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        rows = []
        cases = [
            ("unauthenticated text/plain", "/api/memories", {"Content-Type": "text/plain"}, b""),
            ("unauthenticated JSON", "/api/memories", {"Content-Type": "application/json"}, b""),
            (
                "unauthenticated multipart",
                "/api/knowledge/upload",
                {"Content-Type": "multipart/form-data; boundary=xyz"},
                MULTIPART_HEAD,
            ),
            ("authenticated JSON", "/api/memories", {"Content-Type": "application/json", "X-API-Key": KEY}, b""),
            (
                "authenticated multipart",
                "/api/knowledge/upload",
                {"Content-Type": "multipart/form-data; boundary=xyz", "X-API-Key": KEY},
                MULTIPART_HEAD,
            ),
        ]
        for label, path, headers, head in cases:
            with RssWatch(server.pid) as watch:
                status, sent = stream_body(port, path, headers, args.body_mb, head)
            rows.append(
                (
                    f"{args.body_mb} MB {label}",
                    status,
                    f"{sent / 2**20:.0f} MiB",
                    f"{(watch.peak - watch.before) / 1024:+.0f} MiB",
                )
            )
        guesses, right_latency, right_status = asyncio.run(flood(port, args.flood_seconds, args.connections))
    finally:
        stopping = time.monotonic()
        server.terminate()
        try:
            server.wait(timeout=30)
            print(f"(server stopped {time.monotonic() - stopping:.1f} s after SIGTERM)", file=sys.stderr)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(root, ignore_errors=True)

    print("| body | answer | sent before the answer | server memory growth (peak RSS) |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    print(
        f"| wrong-key guesses answered ({args.connections} connections, {args.flood_seconds:.0f} s) | "
        f"right key during the flood |"
    )
    print("| --- | --- |")
    print(f"| {guesses:.1f} /s | {right_status} in {right_latency * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
