#!/bin/sh
# decode_bench.sh [BUILD_DIR] — the decode shapes of issue #15 (Nq 32, Nkv 8, D 128, bf16 Q), each
# benchmarked side by side: cuDNN, the default variant, and every listed variant of IMPLS
# (default: fused, i.e. every family; the best is starred); then the same shapes with an FP8 KV
# cache (K and V e4m3, KV_IMPLS, default: default,fused; cuDNN has no such graph here). Prints,
# per shape, cuDNN, the default and the best row with its time and the K/V bandwidth
# (2*B*Nkv*S*D*bytes over the time: 2 bytes per bf16 element, 1 per e4m3), and last, for every
# shape with S >= 16k, FP8 K/V's tokens per second over bf16 K/V's (the best bf16 time over the
# best e4m3 time: the same tokens). Full bench output goes to $OUT/decode_bench.txt (or
# ./gpu-logs). SHAPES (";"-separated "B T S mask") replaces the shape list, e.g.
# SHAPES="8 1 16384 none;64 1 16384 none" IMPLS=cudnn,default,decode for a shorter run.
# KV_HEADS (default 8) sets Nkv: 4 is GQA 8. BASE=PATH names a second attntune binary (say main's
# before a change): each shape then runs it and this build's alternately, ROUNDS times (default
# 1; BASE's default 2), with IMPLS and KV_IMPLS usually one KEY each (the A/B of docs/perf.md);
# rows carry the binary's name, and the FP8 ratios are this build's.
build=${1:-build}
out=${OUT:-gpu-logs}
impls=${IMPLS:-cudnn,default,fused}
kv_impls=${KV_IMPLS:-default,fused}
binaries="$build/attntune"
rounds=${ROUNDS:-1}
if [ -n "${BASE:-}" ]; then binaries="$BASE $build/attntune" rounds=${ROUNDS:-2}; fi
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
nkv=${KV_HEADS:-8}
log="$out/decode_bench.txt"
best="$out/decode_bench_best.txt"
: >"$log"
: >"$best"
printf '%-40s %-10s %10s %8s  %s\n' shape impl us 'TB/s' key
[ -n "${BASE:-}" ] && echo '(A/B: each row names its binary and round)'
# B T S mask
shapes=${SHAPES:-"1 1 4096 none;1 1 16384 none;8 1 16384 none;64 1 16384 none;8 16 8192 causal-br;8 1 65536 none;8 16 65536 causal-br"}
IFS=';'
set -f
for shape in $shapes; do
  IFS=' '
  set -- $shape
  b=$1 t=$2 s=$3 mask=$4
  flag=""
  [ "$mask" = causal-br ] && flag=--causal-br
  for kv in bf16 e4m3; do
    if [ "$kv" = bf16 ]; then list=$impls esz=2 kvflag=""; else list=$kv_impls esz=1 kvflag="--kv-dtype e4m3"; fi
    round=1
    while [ "$round" -le "$rounds" ]; do
      for at in $binaries; do
        tag=""
        [ -n "${BASE:-}" ] && tag=" $(basename "$(dirname "$at")") r$round"
        echo "== B=$b T=$t S=$s $mask $kv$tag" >>"$log"
        timeout 300 "$at" bench --impl "$list" --batch "$b" --q-len "$t" --kv-len "$s" --q-heads 32 \
          --kv-heads "$nkv" --head-dim 128 --reps ${REPS:-50} $flag $kvflag >>"$log" 2>&1
        bytes=$((2 * b * nkv * s * 128 * esz))
        # Rows of this shape's section, in --impl order: cudnn, then the default's one key row (or
        # the one KEY asked for), then every listed variant and the starred best; the FP8 ratios
        # take this build's best, or its first kernel row where none is starred (IMPLS without
        # fused, as scripts/h200_bars.sh runs it).
        mine=0
        [ "$at" = "$build/attntune" ] && mine=1
        awk -v want="== B=$b T=$t S=$s $mask $kv$tag" -v shape="B$b T$t S$s $mask $kv$tag" -v bytes="$bytes" \
          -v best="$best" -v s="$s" -v mine="$mine" -v first="$(echo "$list" | sed 's/,.*//')" \
          -v plain="== B=$b T=$t S=$s $mask $kv" '
          /^== / { on = ($0 == want); seen_default = 0; next }
          !on || $2 == "-" { next }
          function row(name, ms, key) { if (ms + 0 > 0) printf "%-40s %-10s %10.2f %8.3f  %s\n", shape, name, ms * 1000, bytes / (ms * 1e-3) / 1e12, key }
          $1 == "cudnn" { row("cudnn", $2, "") }
          $1 ~ /^(fa2|fa3|decode)\./ && !seen_default { row(first == "default" || first == "cudnn" ? "default" : "key", $2, $1); seen_default = 1; first_ms = $2 }
          $1 == "*" { row("best", $3, $2); best_ms = $3 }
          END { ms = best_ms ? best_ms : first_ms; if (mine && s + 0 >= 16384 && ms) print plain, ms >> best }' "$log"
      done
      round=$((round + 1))
    done
  done
  IFS=';'
done
IFS=' '
set +f
# FP8 K/V against bf16 K/V at S >= 16k: the same tokens, so tokens/s is the ratio of the times
# (issue #15 asks for >= 1.8x).
printf '\n%-32s %12s %12s %10s\n' 'FP8 K/V vs bf16 K/V' 'bf16 us' 'e4m3 us' 'tokens/s'
awk '{ key = $2 " " $3 " " $4 " " $5; ms[key, $6] = $7; keys[key] = 1 }
  END { for (k in keys) if ((k, "bf16") in ms && (k, "e4m3") in ms)
          printf "%-32s %12.2f %12.2f %9.2fx\n", k, ms[k, "bf16"] * 1000, ms[k, "e4m3"] * 1000, ms[k, "bf16"] / ms[k, "e4m3"] }' \
  "$best" | sort
