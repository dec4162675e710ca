#!/usr/bin/env bash
# The gates before the tests: ruff lint, ruff's format check and mypy on the package, all configured in
# pyproject.toml. Needs the [test] extra in ./.venv (test.sh installs it); stops at the first gate that fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/.venv/bin"
cd "$ROOT"
echo "ruff check …" >&2
"$BIN/ruff" check .
echo "ruff format --check …" >&2
"$BIN/ruff" format --check .
# mypy finds the package under its real name through this link (see [tool.mypy] in pyproject.toml).
mkdir -p "$ROOT/.venv/mypy-path"
ln -sfn "$ROOT" "$ROOT/.venv/mypy-path/booku_memory"
echo "mypy …" >&2
"$BIN/mypy"
