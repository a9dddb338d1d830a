#!/bin/sh
# wgmma_sass.sh BUILD_DIR KEY... — for each wgmma variant key (fa3, decode .wg), compile its exact
# source for sm_90a (nvcc) and count in the SASS (scripts/wgmma_sass.awk): dummy wgmma groups (an
# empty commit group makes ptxas add one), the MUFU.EX2 issued between a P V wgmma and the wait
# for it, i.e. the exponentials that run under P V, the instruction count and the spill bytes.
# 0 under P V means ptxas hoisted that wait ahead of the softmax: docs/perf.md (fa3 v17, and
# decode step 16) says why this matters.
# LOOPS=N: also each loop of N or more instructions, with its MMAs, conversions, exponentials
# and shared loads (scripts/sass_loops.awk): the hot loop's body is one warp's work per K/V tile.
# Every kernel with a global access before its wait for the previous grid (a race under a
# programmatic launch; scripts/sass_wait.awk) is printed with RACE; WAIT=1 prints where every
# kernel waits. Every global access whose memory descriptor register the function never writes
# is printed with DESC (scripts/sass_desc.awk: a ptxas fault behind L2 cache hints, an illegal
# instruction on the GPU). Works for any kernel key (mma.sync ones too).
# Needs nvcc ($NVCC; else on PATH; else the newest /usr/local/cuda*/bin/nvcc) and cuobjdump
# ($CUOBJDUMP; else on PATH; else beside nvcc; else the one a Python's triton package carries, as
# the CI's virtual environment has it). No GPU.
set -eu
build=$1
shift
find_nvcc() {
  if [ -n "${NVCC:-}" ]; then echo "$NVCC"; return; fi
  if command -v nvcc >/dev/null 2>&1; then command -v nvcc; return; fi
  ls -d /usr/local/cuda*/bin/nvcc 2>/dev/null | sort -V | tail -n 1
}
find_cuobjdump() {
  if [ -n "${CUOBJDUMP:-}" ]; then echo "$CUOBJDUMP"; return; fi
  if command -v cuobjdump >/dev/null 2>&1; then command -v cuobjdump; return; fi
  if [ -x "$(dirname "$nvcc")/cuobjdump" ]; then echo "$(dirname "$nvcc")/cuobjdump"; return; fi
  for py in "$build"/venv/bin/python3 python3; do
    t=$("$py" -c 'import os, triton; print(os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump"))' 2>/dev/null) || continue
    if [ -x "$t" ]; then echo "$t"; return; fi
  done
}
nvcc=$(find_nvcc)
if [ -z "$nvcc" ]; then
  echo "wgmma_sass.sh: no nvcc (set NVCC, put it on PATH, or install a CUDA toolkit under /usr/local)" >&2
  exit 2
fi
cuobjdump=$(find_cuobjdump)
if [ -z "$cuobjdump" ]; then
  echo "wgmma_sass.sh: no cuobjdump (set CUOBJDUMP, or put a CUDA toolkit's or triton's on PATH)" >&2
  exit 2
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
for key in "$@"; do
  "$build/attntune" gen --emit "$key" >"$d/k.cu"
  if ! "$nvcc" -cubin -gencode=arch=compute_90a,code=sm_90a -Xptxas -v "$d/k.cu" -o "$d/k.cubin" >"$d/log" 2>&1; then
    echo "$key: nvcc failed (log: see nvcc -cubin on 'attntune gen --emit $key')"
    continue
  fi
  spill=$(grep -o "[0-9]* bytes spill stores" "$d/log" | head -1)
  "$cuobjdump" -sass "$d/k.cubin" >"$d/all"
  grep -E '^[[:space:]]+/\*[0-9a-f]{4}\*/' "$d/all" >"$d/s"
  awk -v key="$key" -v spill="$spill" -f "$(dirname "$0")/wgmma_sass.awk" "$d/s"
  if [ -n "${LOOPS:-}" ]; then awk -v key="  $key" -v min="$LOOPS" -f "$(dirname "$0")/sass_loops.awk" "$d/s"; fi
  awk -v key=" " -f "$(dirname "$0")/sass_wait.awk" "$d/all" >"$d/w"
  if [ -n "${WAIT:-}" ]; then cat "$d/w"; else grep RACE "$d/w" || true; fi
  awk -v key="$key" -f "$(dirname "$0")/sass_desc.awk" "$d/all"
done
