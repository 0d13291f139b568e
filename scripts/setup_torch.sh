#!/usr/bin/env bash
# Creates the project-local virtual environment .venv-torch with current PyTorch (CPU use),
# NumPy, Matplotlib and ONNX Runtime from PyPI, for scripts/bench_torch.py and
# scripts/plot_bench.py. Separate from .venv so the build environment does not carry torch.
# Idempotent: reinstalls only when scripts/requirements-torch.txt changed since the last
# successful install.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$root/.venv-torch
requirements=$root/scripts/requirements-torch.txt
stamp=$venv/.attngen-requirements

if [ ! -x "$venv/bin/python" ]; then
    command -v python3 >/dev/null || { echo "error: python3 is needed" >&2; exit 1; }
    echo "==> Creating the virtual environment $venv"
    python3 -m venv "$venv" || {
        echo "error: python3 -m venv failed; on Debian: apt-get install python3-venv" >&2
        exit 1
    }
fi
if ! cmp -s "$requirements" "$stamp"; then
    echo "==> Installing PyTorch, NumPy, Matplotlib and ONNX Runtime into $venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$stamp"
fi
echo "==> Ready: $venv/bin/python scripts/bench_torch.py --help"
