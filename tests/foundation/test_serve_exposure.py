"""``serve`` on a non-loopback address: refused without ``--allow-remote`` (plain HTTP would carry the key and every
memory across the network), allowed with it and a loud warning."""

from __future__ import annotations

import pytest

from booku_memory.cli import check_listen_host, is_loopback_host, main


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.org", "[::]"])
def test_serve_refuses_a_public_address_without_allow_remote(tmp_path, capsys, host):
    data_dir = tmp_path / "data"
    assert main(["serve", "--host", host, "--port", "18765", "--data-dir", str(data_dir)]) == 2
    message = capsys.readouterr().err
    assert "--allow-remote" in message and "TLS" in message
    assert not data_dir.exists()  # refused before the store was opened


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_addresses_need_no_flag(host):
    assert is_loopback_host(host)
    check_listen_host(host, allow_remote=False)


def test_allow_remote_starts_with_a_warning(capsys):
    check_listen_host("0.0.0.0", allow_remote=True)
    warning = capsys.readouterr().err
    assert "警告" in warning and "TLS" in warning
