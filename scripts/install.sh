#!/usr/bin/env bash
# Create .venv (Python >= 3.11) and install corral with its test tools into it.
# Re-running is cheap: nothing is reinstalled unless pyproject.toml changed.
# PyTorch is installed first, pinned (CORRAL_TORCH, default torch==2.13.0, a CPU build here), so
# that the test extras which need it (lightning) take that build instead of the newest CUDA one.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
TORCH="${CORRAL_TORCH:-torch==2.13.0}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "corral needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.corral-installed
want="$(cat pyproject.toml scripts/install.sh | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet "$TORCH"
  # The rest through uv, in a third of pip's time (it resolves the same releases). uv reads no pip.conf, so the
  # torch just installed is pinned for it: a dependency asking for a newer one fails here, as under pip, instead
  # of pulling a CUDA build of several GB.
  if .venv/bin/python -m pip install --quiet uv; then
    pinned="$(mktemp)"
    .venv/bin/python -c 'from importlib.metadata import version; print("torch==" + version("torch"))' > "$pinned"
    .venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode --constraint "$pinned" -e '.[dev]'
    rm -f "$pinned"
  else
    .venv/bin/python -m pip install --quiet -e '.[dev]'
  fi
  echo "$want" > "$stamp"
fi
# Byte-compile corral's own modules (pip does it for the packages it installs, not for an editable source tree):
# where PYTHONDONTWRITEBYTECODE is set, every server, supervisor and command would compile them again.
.venv/bin/python -m compileall -q -j 0 src
