#!/bin/sh
# paged_decode_bench.sh [BUILD_DIR] — issue #18's paged decode target on a GPU: for each shape
# (Nq 32, Nkv 8, D 128, bf16 Q) and page size, `attntune bench --page-size P --impl
# decode,contiguous` verifies and times every paged decode variant, then every contiguous decode
# variant of the same shape (the same K/V bytes: every sequence is S long), and ends with the best
# paged rate as a percentage of the best contiguous one. That last line of each run, and the five
# fastest paged keys each against the same key on contiguous K/V, are collected in
# $OUT/paged_decode_best.txt; full output in $OUT/paged_decode_bench.txt (OUT defaults to
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
run=$(mktemp)
trap 'rm -f "$run"' EXIT
# The five fastest paged keys, each with the same key on contiguous K/V: a gap that grows as a
# key's CTAs stream more keys (fewer splits) is per-tile cost, one that does not is per CTA.
pairs() {
  awk -v ps="$1" '
    $1 ~ /^decode\./ { k = $1; sub("\\.pg" ps "\\.", ".", k); paged[k] = $2 }
    $1 == "contiguous" { cont[$2] = $3 }
    END { for (k in paged) if (k in cont) printf "%s %s %s\n", k, paged[k], cont[k] }' |
    sort -k2 -g | head -n 5 |
    awk '{ printf "  %-52s paged %s ms, contiguous %s ms: %.1f%%\n", $1, $2, $3, 100 * $3 / $2 }'
}
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
      --head-dim 128 $mask_flag $kv_flag --impl decode,contiguous >"$run" 2>&1
    cat "$run" >>"$log"
    grep '^best paged decode' "$run" >>"$best"
    pairs "$p" <"$run" >>"$best"
  done
  IFS=';'
done
cat "$best"
