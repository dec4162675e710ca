"""Letters: words left for the other side, or for a later self. Kept forever, verbatim, never merged or decayed.

Who is asking matters here, and it is never taken from a parameter: a ``BookuCompanionService`` is built for one
*side* (``"ai"`` for the LLM tools and the MCP server, ``"user"`` for the dashboard and the user-facing API). A letter
remembers the side that wrote it. The lock rules:

* ``none``: both sides read it.
* ``timed``: the writing side reads it; the other side sees only that a letter exists (id, signature, date, lock)
  until ``unlock_at``; from that instant on (inclusive) it is open to both. ``unlock_date`` must lie in the future
  when the lock is set: a date (local midnight of that day) or a full ISO 8601 moment with an offset.
* ``permanent``: nobody reads the title or the body, the writer included, and the lock can never change again.

Only the writing side may change a lock, and only its own letters can be locked: a letter written by one side but
signed as the other (a dictated letter kept on someone's behalf) stays unlocked, otherwise one side would hold the
key to the other's words. A locked letter never takes part in a query (neither literal nor semantic matching), so
its hidden text cannot be probed by searching.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ValidationError
from ..logic.text import compose_embedding_text
from ..memory_fields import MAX_TITLE_CHARS, checked_limit
from . import fields as f
from .letter_store import LetterRow, LetterStore
from .relatedness import keyword_share, similarities
from .rendering import UNTRUSTED_NOTE, format_time

if TYPE_CHECKING:
    from ..runtime import BookuRuntime
    from ..scope import Scope

SIDES = ("user", "ai")
SIDE_LABELS = {"user": "用户", "ai": "AI"}
LOCK_TYPES = ("none", "timed", "permanent")
LOCK_LABELS = {"none": "不锁", "timed": "定时锁", "permanent": "永久封存"}
MAX_LETTER_CHARS = 100000
MAX_SIGNATURE_CHARS = 80
MAX_PERSON_NAME_CHARS = 40
LETTER_READ_DEFAULT = 10
LETTER_READ_MAX = 50
DEFAULT_AI_NAME = "AI"
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
UNLOCK_FORMATS_HINT = "写日期（2027-01-01，当天 00:00 起）或带时区偏移的完整时刻（2027-01-01T09:00:00+08:00）"


# ------------------------------------------------------------------------------------------------------ the rules
def checked_side(value: Any) -> str:
    if value not in SIDES:
        raise ValidationError(f"side 取值 {value!r} 无效，只能是 user 或 ai（由调用入口决定，不是调用参数）")
    return value


def checked_lock_type(value: Any) -> str:
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in LOCK_TYPES:
        raise ValidationError(
            f"lock_type 取值 {value!r} 无效，可选：none（不锁）、timed（到期打开）、permanent（永久封存）"
        )
    return text


def _local_midnight(day: date) -> float:
    return datetime(day.year, day.month, day.day).timestamp()


def parse_unlock_date(value: Any, *, now: float) -> tuple[float, str]:
    """``(timestamp, text)`` of a timed lock's opening moment, which must lie strictly in the future.

    A date means the local midnight that starts it; a full moment must carry its offset (``+08:00`` or ``Z``),
    because "09:00" alone is a different instant on every server.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValidationError(f'lock_type="timed" 必须同时给 unlock_date，且必须是未来：{UNLOCK_FORMATS_HINT}')
    if not isinstance(value, str):
        raise ValidationError(f"unlock_date 必须是字符串：{UNLOCK_FORMATS_HINT}")
    text = value.strip()
    if _DATE_ONLY.fullmatch(text):
        try:
            moment = _local_midnight(date.fromisoformat(text))
        except ValueError as exc:
            raise ValidationError(f"unlock_date={text!r} 不是有效日期：{UNLOCK_FORMATS_HINT}") from exc
    else:
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ValidationError(f"unlock_date={text!r} 格式无效：{UNLOCK_FORMATS_HINT}") from exc
        if "T" not in text.upper() and " " not in text:
            raise ValidationError(f"unlock_date={text!r} 格式无效：{UNLOCK_FORMATS_HINT}")
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            raise ValidationError(
                f"unlock_date={text!r} 是完整时刻但没有时区偏移，请写成如 2027-01-01T09:00:00+08:00"
                f"，或只写日期 2027-01-01"
            )
        moment = parsed.timestamp()
    if moment <= now:
        raise ValidationError(f"unlock_date={text!r} 不在未来（现在是 {format_time(now)}），定时锁必须给一个更晚的时间")
    return moment, text


def parse_letter_date(value: Any) -> tuple[str, float | None]:
    """``(text, timestamp)`` of the date a writer put on a letter (``("", None)`` when none was given)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return "", None
    if not isinstance(value, str):
        raise ValidationError(f"date 必须是字符串，{f.DATE_FORMATS_HINT}")
    text = value.strip()
    if _DATE_ONLY.fullmatch(text):
        try:
            return text, _local_midnight(date.fromisoformat(text))
        except ValueError as exc:
            raise ValidationError(f"date={text!r} 不是有效日期，{f.DATE_FORMATS_HINT}") from exc
    try:
        return text, datetime.fromisoformat(text).timestamp()
    except ValueError as exc:
        raise ValidationError(f"date={text!r} 格式无效，{f.DATE_FORMATS_HINT}") from exc


def signature(author: str, *, ai_name: str, user_name: str, writer_side: str) -> tuple[str, str]:
    """``(stored author, author side)`` of a signature.

    ``"user"`` is the user's side; ``"ai"`` or the AI's name is the AI's side and is stored as the AI's name; the
    user's name counts as the user's side; any other signature is the writer's own.
    """
    low = author.lower()
    if low == "user":
        return "user", "user"
    if low == "ai" or author == ai_name:
        return ai_name, "ai"
    if user_name and author == user_name:
        return author, "user"
    return author, writer_side


def is_open(letter: LetterRow, now: float) -> bool:
    """Whether a timed lock has reached its moment (inclusive). Permanent letters are never open."""
    return letter.lock_type == "none" or (
        letter.lock_type == "timed" and letter.unlock_at is not None and now >= letter.unlock_at
    )


def may_read(letter: LetterRow, side: str, now: float) -> bool:
    """Whether ``side`` may read the title and body of ``letter`` at ``now``."""
    if letter.lock_type == "permanent":
        return False
    return letter.side == side or is_open(letter, now)


# ------------------------------------------------------------------------------------------------------ rendering
def written_label(letter: LetterRow) -> str:
    return letter.letter_date or time.strftime("%Y-%m-%d", time.localtime(letter.created_at))


def letter_item(letter: LetterRow, side: str, now: float) -> dict[str, Any]:
    """What a reader on ``side`` may know of a letter: ``title``/``content`` only when ``readable``."""
    readable = may_read(letter, side, now)
    item: dict[str, Any] = {
        "id": letter.letter_id,
        "author": letter.author,
        "author_side": letter.author_side,
        "written_by": letter.side,
        "written_by_you": letter.side == side,
        "user_name": letter.user_name,
        "ai_name": letter.ai_name,
        "date": written_label(letter),
        "written_at": letter.written_at,
        "created_at": letter.created_at,
        "lock_type": letter.lock_type,
        "unlock_date": letter.unlock_date,
        "unlock_at": letter.unlock_at,
        "unlocked": letter.lock_type == "timed" and is_open(letter, now),
        "readable": readable,
    }
    if readable:
        item["title"] = letter.title
        item["content"] = letter.content
    return item


def _lock_note(item: dict[str, Any]) -> str:
    if item["lock_type"] == "permanent":
        return "🔒 永久封存：谁都读不到正文"
    if item["lock_type"] != "timed":
        return ""
    moment = format_time(item["unlock_at"])
    if item["unlocked"]:
        return f"🔓 定时锁已于 {moment} 到期"
    if item["readable"]:
        return f"🔒 定时锁：对方 {moment} 起可读，在那之前对方看不到标题和正文"
    return f"🔒 定时锁：{moment} 起可读，标题和正文在那之前对你隐藏"


def render_letter(item: dict[str, Any]) -> str:
    """``[id]`` first (the id letter_lock_update takes), then signature, date, title, lock, and the whole body."""
    head = [f"[{item['id']}] {item['author']}", f"写于 {item['date']}"]
    if item.get("title"):
        head.append(item["title"])
    note = _lock_note(item)
    if note:
        head.append(note)
    mark = "💌" if item["readable"] else "🔒"
    block = f"{mark} " + " · ".join(head)
    return block + ("\n" + item["content"] if item["readable"] else "")


# ------------------------------------------------------------------------------------------------------ the service
class LetterBook:
    """letter_write / letter_lock_update / letter_read for one scope, one side and one clock."""

    def __init__(self, runtime: BookuRuntime, scope: Scope, *, side: str, clock: Callable[[], float]) -> None:
        self.rt = runtime
        self.scope = scope
        self.side = checked_side(side)
        self.clock = clock
        self.store = LetterStore(runtime.db)

    @property
    def configured_ai_name(self) -> str:
        name = getattr(getattr(self.rt.config, "plugin", None), "ai_name", "") or ""
        return name.strip() or DEFAULT_AI_NAME

    def _ensure_may_author(self) -> None:
        if self.scope.authority == "mechanical":
            raise ValidationError("mechanical 权限不能写信，只能改变状态，且必须注明原因")

    async def write(
        self,
        author: Any,
        content: Any,
        *,
        title: Any,
        date: Any,
        user_name: Any,
        ai_name: Any,
        lock_type: Any,
        unlock_date: Any,
    ) -> dict[str, Any]:
        self._ensure_may_author()
        signed = f.checked_line(author, "author", max_chars=MAX_SIGNATURE_CHARS, allow_empty=False)
        body = f.checked_body(content, "content", max_chars=MAX_LETTER_CHARS)
        heading = f.checked_line(title, "title", max_chars=MAX_TITLE_CHARS)
        users = f.checked_line(user_name, "user_name", max_chars=MAX_PERSON_NAME_CHARS)
        ai = f.checked_line(ai_name, "ai_name", max_chars=MAX_PERSON_NAME_CHARS) or self.configured_ai_name
        date_text, date_moment = parse_letter_date(date)
        lock = checked_lock_type("none" if lock_type is None else lock_type)
        now = self.clock()
        unlock_at, unlock_text = self._lock_target(lock, unlock_date, now)
        stored_author, author_side = signature(signed, ai_name=ai, user_name=users, writer_side=self.side)
        if lock != "none" and author_side != self.side:
            raise ValidationError(
                f"只能给自己这一方写的信上锁：署名「{signed}」是{SIDE_LABELS[author_side]}一方，这封是代为保存的信，"
                f'只能不锁（lock_type="none"）'
            )
        letter = LetterRow(
            letter_id="",
            owner_uid=self.scope.owner_uid,
            store_key=self.scope.writable_store_key,
            side=self.side,
            author=stored_author,
            author_side=author_side,
            user_name=users,
            ai_name=ai,
            title=heading,
            letter_date=date_text,
            written_at=date_moment if date_moment is not None else now,
            content=body,
            lock_type=lock,
            unlock_at=unlock_at,
            unlock_date=unlock_text,
            created_at=now,
            lock_changed_at=0.0,
        )
        async with self.rt.db.transaction() as conn:
            letter_id = uuid.uuid4().hex[:12]
            while await self.store.exists(conn, letter_id):
                letter_id = uuid.uuid4().hex[:12]
            letter = replace(letter, letter_id=letter_id)
            await self.store.insert(conn, letter, ctx=self.scope.context)
        item = letter_item(letter, self.side, now)
        lines = [
            f"💌 已写下信件 [{letter_id}]（署名 {stored_author}，写于 {item['date']}），"
            "原文永久保存，不压缩、不合并、不衰减"
        ]
        if lock == "timed" and unlock_at is not None:
            lines.append(
                f"🔒 定时锁：{format_time(unlock_at)} 起对方可读；在那之前对方看不到标题和正文。"
                f"只有你这一方能用 letter_lock_update 改这把锁"
            )
        elif lock == "permanent":
            lines.append("🔒 永久封存：从现在起谁都读不到标题和正文（包括你自己），这把锁也不能再改")
        else:
            lines.append("不上锁：双方都能读")
        return {"action": "letter_write", "id": letter_id, "letter": item, "text": "\n".join(lines)}

    @staticmethod
    def _lock_target(lock: str, unlock_date: Any, now: float) -> tuple[float | None, str]:
        if lock == "timed":
            return parse_unlock_date(unlock_date, now=now)
        if unlock_date not in (None, ""):
            raise ValidationError(f'unlock_date 只和 lock_type="timed" 一起用；lock_type="{lock}" 时不要传 unlock_date')
        return None, ""

    async def change_lock(self, letter_id: Any, lock_type: Any, unlock_date: Any) -> dict[str, Any]:
        wanted_id = f.checked_line(letter_id, "letter_id", max_chars=64, allow_empty=False).strip("[]")
        lock = checked_lock_type(lock_type)
        now = self.clock()
        unlock_at, unlock_text = self._lock_target(lock, unlock_date, now)
        async with self.rt.db.transaction() as conn:
            letter = await self.store.get(wanted_id, store_keys=[self.scope.writable_store_key], conn=conn)
            if letter is None:
                raise NotFoundError(
                    f"letter_id={wanted_id!r} 不存在（或不在当前可写的库中），请从 letter_read 结果开头的方括号里取 ID"
                )
            if letter.side != self.side:
                raise ValidationError(
                    f"只有写这封信的一方能改它的锁：[{wanted_id}] 是{SIDE_LABELS[letter.side]}一方写的，"
                    f"你（{SIDE_LABELS[self.side]}一方）改不了"
                )
            if letter.lock_type == "permanent":
                raise ValidationError(f"[{wanted_id}] 已永久封存：永久封存是终态，任何一方都不能再改这把锁")
            if lock != "none" and letter.author_side != letter.side:
                raise ValidationError(
                    f"[{wanted_id}] 署名是{SIDE_LABELS[letter.author_side]}一方，是代为保存的信，不能上锁"
                )
            unchanged = letter.lock_type == lock and letter.unlock_at == unlock_at
            if not unchanged:
                await self.store.change_lock(
                    conn,
                    letter,
                    lock_type=lock,
                    unlock_at=unlock_at,
                    unlock_date=unlock_text,
                    ctx=self.scope.context,
                    now=now,
                )
        updated = replace(letter, lock_type=lock, unlock_at=unlock_at, unlock_date=unlock_text)
        item = letter_item(updated, self.side, now)
        if unchanged:
            text = f"[{wanted_id}] 的锁本来就是「{LOCK_LABELS[lock]}」，未改动"
        elif lock == "none":
            text = f"🔓 已解锁 [{wanted_id}]：双方都能读"
        elif lock == "timed" and unlock_at is not None:
            text = f"🔒 已把 [{wanted_id}] 设为定时锁：{format_time(unlock_at)} 起对方可读"
        else:
            text = f"🔒 已把 [{wanted_id}] 永久封存：从现在起谁都读不到正文，这把锁也不能再改"
        return {
            "action": "letter_lock_update",
            "id": wanted_id,
            "changed": not unchanged,
            "letter": item,
            "text": text + "（只动了锁，标题、正文、署名和时间都没变）",
        }

    async def read(self, query: Any, author: Any, date_from: Any, date_to: Any, limit: Any) -> dict[str, Any]:
        text = None if query is None or (isinstance(query, str) and not query.strip()) else f.checked_query(query)
        wanted_author = f.checked_line(author, "author", max_chars=MAX_SIGNATURE_CHARS)
        dates = f.checked_date_range(date_from, date_to)
        count = checked_limit("limit", limit, default=LETTER_READ_DEFAULT, maximum=LETTER_READ_MAX)
        now = self.clock()
        letters = [
            letter
            for letter in await self.store.listing(store_keys=self.scope.readable_store_keys)
            if self._by_author(letter, wanted_author) and dates.contains(letter.written_at)
        ]
        degraded = ""
        if text is None:
            chosen = letters[:count]
        else:
            chosen, degraded = await self._search(
                text, [row for row in letters if may_read(row, self.side, now)], count
            )
        items = [letter_item(letter, self.side, now) for letter in chosen]
        sections = []
        if degraded:
            sections.append(f"⚠ 向量检索不可用，本次已退回关键词匹配（换个说法的信可能找不到）：{degraded}")
        sections.append(UNTRUSTED_NOTE.replace("记忆数据", "信件原文"))
        if text is None:
            heading = f"最近的信件 {len(items)} 封（按时间倒序，完整原文）" if items else "还没有符合条件的信件。"
        else:
            heading = (
                f"检索「{text}」找到 {len(items)} 封信（完整原文；上了锁、你还不能读的信不参与检索）"
                if items
                else f"检索「{text}」没有找到你能读的信。"
            )
        sections.append(heading)
        sections.extend(render_letter(item) for item in items)
        answer = {
            "action": "letter_read",
            "query": text,
            "total": len(items),
            "items": items,
            "text": "\n\n".join(sections),
        }
        if degraded:
            answer["degraded"] = degraded
        return answer

    def _by_author(self, letter: LetterRow, wanted: str) -> bool:
        if not wanted:
            return True
        low = wanted.lower()
        if low == "user":
            return letter.author_side == "user"
        if low == "ai" or wanted == self.configured_ai_name:
            return letter.author_side == "ai"
        return letter.author == wanted

    async def _search(self, query: str, letters: list[LetterRow], count: int) -> tuple[list[LetterRow], str]:
        """Literal hits first (newest first), then the rest by semantic similarity, or by keyword overlap when the
        model is unavailable. Only letters the caller may read are ever passed in."""
        needle = query.lower()
        literal = [row for row in letters if needle in "\n".join((row.title, row.content, row.author)).lower()]
        rest = [row for row in letters if row not in literal]
        sims = await similarities(
            self.rt, query, [compose_embedding_text(row.title, row.content) for row in rest], query=True
        )
        if sims.values is not None:
            ranked = [row for _, row in sorted(zip(sims.values.tolist(), rest), key=lambda pair: -pair[0])]
        else:
            shares = [(keyword_share(query, f"{row.title}\n{row.content}"), row) for row in rest]
            ranked = [row for share, row in sorted(shares, key=lambda pair: -pair[0]) if share > 0]
        return (literal + ranked)[:count], sims.degraded
