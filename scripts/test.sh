#!/usr/bin/env bash
# One command on a fresh machine: install everything (Python deps into ./.venv, Debian's Chromium for the browser
# tests) and run the whole test suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh" "[test]"
if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi wenquanyi; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null
fi
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest "$@"
