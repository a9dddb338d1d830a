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
# Needs nvcc, and cuobjdump ($CUOBJDUMP, default: cuobjdump on PATH). No GPU.
set -eu
build=$1
shift
cuobjdump=${CUOBJDUMP:-cuobjdump}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
for key in "$@"; do
  "$build/attntune" gen --emit "$key" >"$d/k.cu"
  if ! nvcc -cubin -gencode=arch=compute_90a,code=sm_90a -Xptxas -v "$d/k.cu" -o "$d/k.cubin" >"$d/log" 2>&1; then
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
