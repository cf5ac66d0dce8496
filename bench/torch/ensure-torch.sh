#!/usr/bin/env bash
# Installs the engine benchmark's PyTorch baseline: Debian's python3-torch (1.13) with OpenBLAS's
# pthread build (libopenblas0-pthread, which becomes the libblas.so.3 torch calls). Run by the engine
# suite (bench/torch/baseline.ts) before it starts bench/torch/engine.py; never a dependency of nexrl.
# Idempotent: does nothing when "$NEXRL_BENCH_PYTHON -c 'import torch'" works (NEXRL_BENCH_PYTHON defaults to /usr/bin/python3,
# the interpreter Debian's packages install into). Needs apt-get and root, or sudo without a password;
# otherwise, or when the install fails, it says why on stderr and exits 1, and the suite skips the
# PyTorch rows with that note.
set -euo pipefail
python="${NEXRL_BENCH_PYTHON:-/usr/bin/python3}"
if "$python" -c 'import torch' 2>/dev/null; then
  exit 0
fi
as_root=()
if [ "$(id -u)" -ne 0 ] && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
fi
if ! command -v apt-get >/dev/null 2>&1 || { [ "$(id -u)" -ne 0 ] && [ ${#as_root[@]} -eq 0 ]; }; then
  echo "ensure-torch: $python cannot import torch, and this is neither root nor passwordless sudo with apt-get;" \
    "install Debian's python3-torch and libopenblas0-pthread (or set NEXRL_BENCH_PYTHON to an interpreter with torch)" >&2
  exit 1
fi
echo "ensure-torch: installing python3-torch libopenblas0-pthread with apt-get" >&2
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  python3-torch libopenblas0-pthread >/dev/null
"$python" -c 'import torch; print("ensure-torch: torch", torch.__version__)' >&2
