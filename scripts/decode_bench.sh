#!/bin/sh
# decode_bench.sh [BUILD_DIR] — the decode shapes of issue #15 (Nq 32, Nkv 8, D 128, bf16), each
# benchmarked side by side: cuDNN, the default variant, and every listed variant of IMPLS
# (default: fused, i.e. every family; the best is starred). Prints, per shape, cuDNN, the default
# and the best row with its time and the K/V bandwidth (2*B*Nkv*S*D*2 bytes over the time).
# Full bench output goes to $OUT/decode_bench.txt (or ./gpu-logs).
build=${1:-build}
out=${OUT:-gpu-logs}
impls=${IMPLS:-cudnn,default,fused}
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
at="$build/attntune"
log="$out/decode_bench.txt"
: >"$log"
printf '%-26s %-10s %10s %8s  %s\n' shape impl us 'TB/s' key
# B T S mask
for shape in "1 1 4096 none" "1 1 16384 none" "8 1 16384 none" "64 1 16384 none" "8 16 8192 causal-br"; do
  set -- $shape
  b=$1 t=$2 s=$3 mask=$4
  flag=""
  [ "$mask" = causal-br ] && flag=--causal-br
  echo "== B=$b T=$t S=$s $mask" >>"$log"
  timeout 240 "$at" bench --impl "$impls" --batch "$b" --q-len "$t" --kv-len "$s" --q-heads 32 --kv-heads 8 \
    --head-dim 128 --reps ${REPS:-50} $flag >>"$log" 2>&1
  bytes=$((2 * b * 8 * s * 128 * 2))
  # Rows of this shape's section, in --impl order: cudnn, then the default's one key row, then
  # every listed variant and the starred best.
  awk -v want="== B=$b T=$t S=$s $mask" -v shape="B$b T$t S$s $mask" -v bytes="$bytes" '
    /^== / { on = ($0 == want); seen_default = 0; next }
    !on || $2 == "-" { next }
    function row(name, ms, key) { if (ms + 0 > 0) printf "%-26s %-10s %10.2f %8.3f  %s\n", shape, name, ms * 1000, bytes / (ms * 1e-3) / 1e12, key }
    $1 == "cudnn" { row("cudnn", $2, "") }
    $1 ~ /^(fa2|fa3|decode)\./ && !seen_default { row("default", $2, $1); seen_default = 1 }
    $1 == "*" { row("best", $3, $2) }' "$log"
done
