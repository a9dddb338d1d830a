#!/bin/sh
# fa3_sass.sh BUILD_DIR KEY... — for each variant key, compile its exact source for sm_90a (nvcc)
# and count in the SASS: dummy wgmma groups (an empty commit group makes ptxas add one), the
# MUFU.EX2 that sit between the wait for S (DEPBAR.LE 1) and the wait for P V (DEPBAR.LE 0, the
# one not reached by a jump: the first tile's), i.e. the exponentials that run under P V, the
# instruction count and the spill bytes. docs/perf.md (fa3, v17) says why this matters.
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
  "$cuobjdump" -sass "$d/k.cubin" | grep -E '^[[:space:]]+/\*[0-9a-f]{4}\*/' >"$d/s"
  awk -v key="$key" -v spill="$spill" '
    /RZ, gdesc\[URZ\]/ { dummy++ }
    /DEPBAR.LE gsb0, 0x1/ { inwin = 1 }
    /DEPBAR.LE gsb0, 0x0/ { if (inwin && prev !~ / BRA 0x/) inwin = 0 }
    /MUFU.EX2/ { total++; if (inwin) under++ }
    { n++; prev = $0 }
    END { printf "%-58s dummy wgmma %d  ex2 under P V %d/%d  instructions %d  %s\n", key, dummy, under, total, n, spill }' "$d/s"
done
