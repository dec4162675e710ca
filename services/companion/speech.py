"""Speaker lines: what *other people* said, written as a line of its own ``@名字：原话``.

Such a line is returned as a separate JSON entry with its speaker, so that it is never read as something the user
said. Words said inside narration ("小王说……") are not parsed: only the line form is. Both the full-width and the
ASCII at-sign and colon are accepted; the speaker is 1–40 characters without a colon.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

SPEAKER_LINE = re.compile(r"^\s*[@＠](?P<speaker>[^:：@＠\n]{1,40}?)\s*[:：]\s*(?P<text>\S.*?)\s*$")


@dataclass(frozen=True)
class SpeakerLine:
    line: int  # 1-based line number in the content
    speaker: str
    text: str

    def as_dict(self) -> dict[str, object]:
        return {"speaker": self.speaker, "text": self.text, "line": self.line}


def parse_speaker_line(line: str) -> SpeakerLine | None:
    match = SPEAKER_LINE.match(line)
    if match is None or not match.group("speaker").strip():
        return None
    return SpeakerLine(0, match.group("speaker").strip(), match.group("text"))


def speaker_lines(content: str) -> list[SpeakerLine]:
    """Every ``@名字：原话`` line of ``content``, in order."""
    found = []
    for number, line in enumerate(content.splitlines(), start=1):
        parsed = parse_speaker_line(line)
        if parsed is not None:
            found.append(SpeakerLine(number, parsed.speaker, parsed.text))
    return found


def render_with_speakers(content: str) -> str:
    """The content line by line, each speaker line replaced by its JSON entry ``{"speaker", "text"}``.

    Narration lines are returned exactly as stored; only the speaker lines change form, so the words stay verbatim.
    """
    lines = []
    for line in content.splitlines():
        parsed = parse_speaker_line(line)
        if parsed is None:
            lines.append(line)
        else:
            lines.append(json.dumps({"speaker": parsed.speaker, "text": parsed.text}, ensure_ascii=False))
    return "\n".join(lines)
