#!/usr/bin/env bash
# Create (or update) python_compat/.venv with the pinned JAX/Flax/optax stack.
# Idempotent: re-running reuses the venv and only installs what is missing.
# Override the interpreter with PYTHON=/path/to/python3.11 if needed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
PYTHON="${PYTHON:-python3}"

ver="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "$ver" != "3.11" ]; then
    echo "warning: $PYTHON is Python $ver; the pins in requirements.txt were resolved for 3.11" >&2
fi

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$HERE/requirements.txt"

echo "$VENV"
