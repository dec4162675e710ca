#!/usr/bin/env bash
# One command on a fresh machine: install everything into ./.venv and start the memory service with its dashboard
# (embedded SQLite + embedded Chroma + the bundled local embedding model; no network needed after install).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m booku_memory serve "$@"
