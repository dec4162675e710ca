from pathlib import Path

import pytest

from booku_memory.config import BookuConfig, load_config
from booku_memory.services.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "example.toml"


def test_defaults_match_reference_where_meaningful():
    config = load_config(None)
    assert config.retrieval.default_top_k == 5
    assert config.write_conflict.energy_cutoff == 0.1
    assert config.time_window.emergent_days == 7
    assert config.chunking.max_chunk_chars == 900


def test_unknown_key_names_the_key_and_the_alternatives():
    with pytest.raises(ConfigError, match=r"retrieval\.top_kk.*default_top_k"):
        load_config({"retrieval": {"top_kk": 3}})


def test_unknown_section_is_rejected():
    with pytest.raises(ConfigError, match=r"\[rag_params\]"):
        load_config({"rag_params": {}})


def test_out_of_range_value_names_the_allowed_range():
    with pytest.raises(ConfigError, match=r"retrieval\.default_top_k=99.*1 到 50"):
        load_config({"retrieval": {"default_top_k": 99}})


def test_wrong_type_and_bad_choice_are_rejected():
    with pytest.raises(ConfigError, match="必须是整数"):
        load_config({"retrieval": {"default_top_k": "5"}})
    with pytest.raises(ConfigError, match="embedding.provider"):
        load_config({"embedding": {"provider": "magic"}})


def test_example_config_loads_and_lists_every_section():
    config = load_config(EXAMPLE)
    assert isinstance(config, BookuConfig)
    text = EXAMPLE.read_text(encoding="utf-8")
    for section in BookuConfig.__dataclass_fields__:
        assert f"[{section}]" in text


def test_config_file_errors_are_readable(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[retrieval\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="不是合法的 TOML"):
        load_config(bad)


def test_example_config_is_rendered_from_the_schema():
    from booku_memory.config.example import render_example

    assert EXAMPLE.read_text(encoding="utf-8") == render_example(), (
        "run: python -m booku_memory.config.example > config/example.toml"
    )
