#!/usr/bin/env bash
# One command on a fresh machine: install everything (Python deps into ./.venv, Debian's Chromium for the browser
# tests), run the gates (ruff lint and format check, mypy: scripts/lint.sh) and then the whole test suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh" "[test]"
if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi wenquanyi; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null
fi
bash "$ROOT/scripts/lint.sh"
# Run from tests/ (settings in tests/pytest.ini): the repository root is the package itself and must not be
# collected as a test package under whatever name the checkout folder has.
cd "$ROOT/tests"
exec "$ROOT/.venv/bin/pytest" "$@"
