#!/bin/sh
# paged_decode_bench.sh [BUILD_DIR] — issue #18's paged decode target on a GPU: for each shape
# (Nq 32, Nkv 8, D 128, bf16 Q) and page size, `attntune bench --page-size P --impl
# decode,contiguous` verifies and times every paged decode variant, then every contiguous decode
# variant of the same shape (the same K/V bytes: every sequence is S long), and ends with the best
# paged rate as a percentage of the best contiguous one. That last line of each run is collected
# in $OUT/paged_decode_best.txt; full output in $OUT/paged_decode_bench.txt (OUT defaults to
# ./gpu-logs). SHAPES (";"-separated "B T S mask") and PAGES (space-separated page sizes) replace
# the defaults, e.g. SHAPES="8 1 16384 none" PAGES=16 for one line. KV=e4m3 runs an FP8 KV cache.
build=${1:-build}
out=${OUT:-gpu-logs}
pages=${PAGES:-"16 1 64 256"}
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
at="$build/attntune"
log="$out/paged_decode_bench.txt"
best="$out/paged_decode_best.txt"
: >"$log"
: >"$best"
kv_flag=""
[ -n "$KV" ] && kv_flag="--kv-dtype $KV"
shapes=${SHAPES:-"8 1 16384 none;1 1 16384 none;64 1 16384 none;8 16 8192 causal-br"}
IFS=';'
set -f
for shape in $shapes; do
  IFS=' '
  set -- $shape
  b=$1 t=$2 s=$3 mask=$4
  mask_flag=""
  [ "$mask" = causal-br ] && mask_flag="--causal-br"
  for p in $pages; do
    echo "== B$b T$t S$s $mask page $p ${KV:+kv $KV}" | tee -a "$log" >>"$best"
    # shellcheck disable=SC2086
    "$at" bench --page-size "$p" --batch "$b" --q-len "$t" --kv-len "$s" --q-heads 32 --kv-heads 8 \
      --head-dim 128 $mask_flag $kv_flag --impl decode,contiguous >>"$log" 2>&1
    grep '^best paged decode' "$log" | tail -n 1 >>"$best"
  done
  IFS=';'
done
cat "$best"
