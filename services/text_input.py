"""The one gate every text argument of a public service method passes: encodable, and queries of bounded length.

Why a class decorator rather than checks in each method: text reaches the services from the LLM tools, MCP, the
dashboard, the CLI and client plugins, and a single method left unchecked was enough for a lone surrogate
(``"\\ud800"``, which JSON allows) to travel down to SQLite or jieba and surface as a ``UnicodeEncodeError`` and an
HTTP 500. Wrapping every public coroutine of a service class checks each argument, nested lists and dicts
included, before the method body runs, so a method added later is covered without anyone remembering to.

Queries (the parameters named in ``QUERY_PARAMETERS``) are also capped at ``retrieval.max_query_chars``: a query's
cost grows with its length on every read path (segmentation, the keyword plan, embedding, SQL ``LIKE``), so an
unbounded one could hold the process for minutes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ValidationError

# Parameters of the public services that hold a search query or a filter keyword.
QUERY_PARAMETERS = frozenset({"query", "query_text", "keyword"})
# Nesting deeper than this is not walked (no public argument nests this deep; it bounds the walk).
MAX_DEPTH = 8
# How much of a too-long or broken value an error message quotes.
QUOTE_CHARS = 20

ServiceClass = TypeVar("ServiceClass", bound=type)


def encodable_text(value: str, field: str) -> str:
    """``value`` unchanged when it encodes as UTF-8; else a ``ValidationError`` naming ``field``.

    A lone surrogate (half of a UTF-16 pair, e.g. from a JSON ``"\\ud800"`` escape) is the usual culprit.
    """
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{field} 含有无法编码为 UTF-8 的字符（第 {exc.start + 1} 个字符 {value[exc.start]!r}，"
            "常见于孤立的代理项 \\ud800–\\udfff）；只接受合法的 Unicode 文本，请去掉或替换该字符后重试"
        ) from None
    return value


def check_text_tree(value: Any, field: str, depth: int = 0) -> None:
    """Check every string in ``value`` (a string, or lists/tuples/sets/dicts of them, keys included)."""
    if isinstance(value, str):
        encodable_text(value, field)
    elif depth >= MAX_DEPTH:
        return
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text_tree(key, field, depth + 1)
            check_text_tree(item, f"{field}.{key}" if isinstance(key, str) and key.isascii() else field, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            check_text_tree(item, field, depth + 1)


def bounded_query(value: Any, field: str, limit: int) -> None:
    """A ``ValidationError`` naming the limit when the query ``value`` is longer than ``limit`` characters."""
    if isinstance(value, str) and len(value) > limit:
        raise ValidationError(
            f"{field} 太长：{len(value)} 个字符，最多 {limit} 个（配置项 retrieval.max_query_chars）；"
            "请只保留要找的关键词或一句话"
        )


def _query_limit(service: Any) -> int | None:
    """The configured query cap of the service's runtime, or None when it has none (not started)."""
    runtime = getattr(service, "_runtime", None) or getattr(service, "runtime", None)
    retrieval = getattr(getattr(runtime, "config", None), "retrieval", None)
    return getattr(retrieval, "max_query_chars", None)


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    names = list(inspect.signature(method).parameters)[1:]  # after self

    @functools.wraps(method)
    async def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = [*zip(names, args), *kwargs.items()]
        for name, value in arguments:
            check_text_tree(value, name)
        limit = None
        for name, value in arguments:
            if name in QUERY_PARAMETERS and isinstance(value, str):
                limit = limit or _query_limit(self)
                if limit:
                    bounded_query(value, name, limit)
        return await method(self, *args, **kwargs)

    return guarded


def guarded_text_inputs(cls: ServiceClass) -> ServiceClass:
    """Class decorator: every public ``async def`` of ``cls`` checks its text arguments first (module docstring).

    Subclasses (the host adapter's services) inherit the checked methods.
    """
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.iscoroutinefunction(member):
            setattr(cls, name, _guarded(member))
    return cls
