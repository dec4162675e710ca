#!/usr/bin/env bash
# Creates ./.venv (Python 3.11/3.12) and installs Booku Memory into it (editable). Called by serve.sh and test.sh.
# It installs only when pyproject.toml, the extras or the Python version changed since the last install (a stamp
# file in .venv holds their hash), and pip's output goes to .venv/install.log: shown only when the install fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
EXTRAS="${1:-}"
VENV_PYTHON="$ROOT/.venv/bin/python"
if [ ! -x "$VENV_PYTHON" ]; then
  "$PYTHON" -m venv "$ROOT/.venv"
fi
stamp_of() { echo "$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1) $1 $("$VENV_PYTHON" --version 2>&1)"; }
stamp_file() { echo "$ROOT/.venv/booku-install${1:+-${1//[^a-z]/}}.stamp"; }
WANT="$(stamp_of "$EXTRAS")"
if [ -f "$(stamp_file "$EXTRAS")" ] && [ "$(cat "$(stamp_file "$EXTRAS")")" = "$WANT" ] \
    && "$VENV_PYTHON" -c "import booku_memory" >/dev/null 2>&1; then
  exit 0
fi
LOG="$ROOT/.venv/install.log"
echo "正在把 Booku Memory${EXTRAS:+ $EXTRAS} 安装到 $ROOT/.venv（仅在首次或 pyproject.toml 变化后）…" >&2
if ! { "$VENV_PYTHON" -m pip install --upgrade pip && "$VENV_PYTHON" -m pip install -e "$ROOT$EXTRAS"; } >"$LOG" 2>&1; then
  echo "安装失败，pip 的最后输出如下（完整记录：$LOG）：" >&2
  tail -n 40 "$LOG" >&2
  exit 1
fi
echo "$WANT" >"$(stamp_file "$EXTRAS")"
# An install with extras contains the plain install too.
[ -n "$EXTRAS" ] && stamp_of "" >"$(stamp_file "")"
exit 0
