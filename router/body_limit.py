"""Request-body caps for an ASGI app (the dashboard's gate applies them per route).

Two checks, because a client need not say how much it sends: a declared ``Content-Length`` over the cap is refused
before one byte is read, and a body that runs past the cap while streaming (chunked, or a lying length) is cut off
at the cap: the app's own reading fails, whatever the app then tries to answer is replaced by the 413, and nothing
past the cap is ever held in memory or spooled to disk.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

TooLarge = Callable[[], Awaitable[None]]  # sends the 413 answer (built by the caller, in its own error format)


class BodyTooLarge(Exception):
    """Raised inside the app's ``receive`` once the body passed its cap."""


def declared_length(scope: Scope) -> int | None:
    """The request's ``Content-Length`` (``None`` when absent); ``ValueError`` when it is not one plain number."""
    values = [value for name, value in scope.get("headers", ()) if name.lower() == b"content-length"]
    if not values:
        return None
    if len(set(values)) != 1 or not values[0].strip().isdigit():
        raise ValueError("Content-Length 不合法")
    return int(values[0])


def carries_body(scope: Scope) -> bool:
    """Whether the request says it has a body (a non-zero length, or any transfer coding such as chunked)."""
    headers = {name.lower() for name, _ in scope.get("headers", ())}
    if b"transfer-encoding" in headers:
        return True
    try:
        return bool(declared_length(scope))
    except ValueError:
        return True


async def read_capped(receive: Receive, limit: int) -> bytes | None:
    """The whole body if it fits in ``limit`` bytes, else ``None`` (reading stops at the first chunk past it)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app an already-read body, then passes on the real channel (disconnects)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


async def call_with_body_limit(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send, *, limit: int, too_large: TooLarge
) -> None:
    """Run ``app`` with its body cut off at ``limit`` bytes; past it, the client gets ``too_large()``'s answer."""
    received = 0
    exceeded = False
    app_started = False
    answered = False

    async def limited_receive() -> Message:
        nonlocal received, exceeded
        if exceeded:
            raise BodyTooLarge()
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                exceeded = True
                raise BodyTooLarge()
        return message

    async def answer_too_large() -> None:
        nonlocal answered
        if not answered and not app_started:
            answered = True
            await too_large()

    async def guarded_send(message: Message) -> None:
        nonlocal app_started
        if exceeded:
            await answer_too_large()  # the app's own answer to its failed read (a 400, a 500) is replaced
            return
        if message["type"] == "http.response.start":
            app_started = True
        await send(message)

    try:
        await app(scope, limited_receive, guarded_send)
    except Exception:
        if not exceeded:
            raise
    if exceeded:
        await answer_too_large()
