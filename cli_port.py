"""Claiming a listening port before anything else starts, so a busy port fails fast with a hint.

``serve`` binds its socket first and hands that very socket to uvicorn: nothing is opened, printed or announced
when the port is taken, and no other process can grab the port between the check and the start.
"""

from __future__ import annotations

import errno
import socket

from .services.errors import BookuError


class PortBusyError(BookuError):
    """The requested address is taken (or not ours to bind); the message suggests ``--port``."""


def claim_port(host: str, port: int, *, flag: str = "--port") -> socket.socket:
    """A bound, listening TCP socket on ``host:port``; ``PortBusyError`` (Chinese, naming ``flag``) when busy."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortBusyError(
                f"端口 {port} 已被占用（{host}:{port}），可能已有一个 Booku 或其他程序在运行。"
                f"请先停止它，或用 {flag} 换一个端口，例如 {flag} {port + 1}"
            ) from exc
        raise PortBusyError(
            f"无法监听 {host}:{port}：{exc.strerror or exc}。请检查地址，或用 {flag} 换一个端口"
        ) from exc
    return sock
