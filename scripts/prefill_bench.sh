#!/bin/sh
# prefill_bench.sh [BUILD_DIR] — the prefill benchmark of issue #14 in one go, on the GPU machine:
# B=2 N=16 T=S=8192 (bf16 D 128, causal, D 64, D 256; e4m3 D 128 and D 256) and B=1 Nq 32 Nkv 8
# T=S=16384 causal, each through `attntune bench --impl $IMPLS` (default cudnn,default; add fused
# for every listed variant, the best starred), ROUNDS times (default 2).
# The H200's SM clock moves under its power cap (1530-1875 MHz in one call, docs/perf.md "v20"),
# and not alike for cuDNN's kernel and ours, so one run's ratio says little: every bench runs with
# nvidia-smi sampling the SM clock, the utilization and the power draw every 200 ms, and the
# table gives the median clock of the samples that drew 80% of the power limit or more (the timed
# replays, where the cap sets the clock), else of the busy ones (utilization 90% or more). Idle
# samples (NVRTC compiling) and busy ones at low power (the naive reference verifying) sit at the
# top clock, 1980 MHz on the H200, which is no timed kernel's.
# BENCH_ROUNDS=N passes `--rounds N` to each bench (the implementations timed N times in turn in
# one process, the order reversed every second time): the row then gives the medians.
# BASE=PATH names a second attntune binary (say main's before a change): each round then runs it
# and this build's alternately, shape by shape, the A/B of docs/perf.md. SHAPES (";"-separated
# names from the list below) narrows the run, e.g. SHAPES="bf16-d128;e4m3-d128" ROUNDS=3, or
# picks the two FP8 D 64 shapes that are not #14's (e4m3-d64, e4m3-d64-causal; no target).
# Prints one row per shape, round and binary, last; full bench output goes to
# $OUT/prefill_bench.txt (or ./gpu-logs).
build=${1:-build}
out=${OUT:-gpu-logs}
impls=${IMPLS:-cudnn,default}
rounds=${ROUNDS:-2}
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
log="$out/prefill_bench.txt"
rows="$out/prefill_bench_rows.txt"
: >"$log"
: >"$rows"
binaries="$build/attntune"
[ -n "${BASE:-}" ] && binaries="$BASE $build/attntune"

# name, #14's target in TFLOP/s, bench flags
flags_of() {
  case "$1" in
    bf16-d128) echo "720 --head-dim 128" ;;
    bf16-d128-causal) echo "650 --head-dim 128 --causal" ;;
    bf16-d64) echo "500 --head-dim 64" ;;
    bf16-d256) echo "770 --head-dim 256" ;;
    e4m3-d128) echo "1050 --head-dim 128 --dtype e4m3" ;;
    e4m3-d256) echo "1200 --head-dim 256 --dtype e4m3" ;;
    gqa-16k-causal) echo "- --head-dim 128 --causal --batch 1 --seq-len 16384 --q-heads 32 --kv-heads 8" ;;
    # not #14's: FP8 at D 64 (SHAPES names them)
    e4m3-d64) echo "- --head-dim 64 --dtype e4m3" ;;
    e4m3-d64-causal) echo "- --head-dim 64 --dtype e4m3 --causal" ;;
    *) return 1 ;;
  esac
}
shapes=${SHAPES:-"bf16-d128;bf16-d128-causal;bf16-d64;bf16-d256;e4m3-d128;e4m3-d256;gqa-16k-causal"}

median_clock() { # the median clock of a file of nvidia-smi samples ("utilization %, MHz, W, limit
  # W" a line) drawing 80% of the limit or more; if none, of those busy (90% or more); or -
  awk -F', *' '$2 + 0 > 0 && $4 + 0 > 0 && $3 >= 0.8 * $4 { print "p", $2 + 0 }
               $2 + 0 > 0 && $1 + 0 >= 90 { print "b", $2 + 0 }' "$1" 2>/dev/null | sort -k1,1 -k2n |
    awk '{ v[$1, n[$1]++] = $2 }
         END { k = n["p"] ? "p" : "b"; if (n[k]) print v[k, int((n[k] - 1) / 2)]; else print "-" }'
}

rc=0
run=0
round=1
while [ "$round" -le "$rounds" ]; do
  IFS=';'
  for name in $shapes; do
    IFS=' '
    if ! spec=$(flags_of "$name"); then
      echo "prefill_bench.sh: unknown shape '$name' in SHAPES" >&2
      exit 2
    fi
    set -- $spec
    target=$1
    shift
    for at in $binaries; do
      clocks="$out/.clocks.$$"
      : >"$clocks"
      smi=""
      if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=utilization.gpu,clocks.sm,power.draw,power.limit --format=csv,noheader,nounits -lms 200 >"$clocks" 2>/dev/null &
        smi=$!
      fi
      run=$((run + 1)) # a shape named twice in SHAPES gets two sections, each its own rows
      echo "== $name round $round $at #$run" >>"$log"
      # Later flags win: the 16k shape's --batch and --seq-len replace these defaults.
      timeout 300 "$at" bench --impl "$impls" --batch 2 --seq-len 8192 --q-heads 16 --reps ${REPS:-10} \
        ${BENCH_ROUNDS:+--rounds "$BENCH_ROUNDS"} "$@" >>"$log" 2>&1 || rc=1
      [ -n "$smi" ] && kill "$smi" 2>/dev/null && wait "$smi" 2>/dev/null
      mhz=$(median_clock "$clocks")
      rm -f "$clocks"
      # This section's rows: cudnn, then the default's key row (the first generated one), and
      # with fused the starred best; with --rounds, cudnn's and the default's medians replace
      # the first round's readings (the median table names the default "default").
      awk -v want="== $name round $round $at #$run" -v name="$name" -v round="$round" -v at="$at" \
        -v target="$target" -v mhz="$mhz" '
        /^== / { on = ($0 == want); next }
        !on { next }
        /^median of/ { med = 1; cudnn = ""; mdef = 1; next }
        med && $1 == "default" && $3 + 0 > 0 && mdef { def = $3; mdef = 0; next }
        med && $1 ~ /^(fa2|fa3|decode)\./ && $1 == key && $3 + 0 > 0 && mdef { def = $3; mdef = 0; next }
        $1 == "cudnn" && $3 + 0 > 0 { cudnn = $3 }
        $1 ~ /^(fa2|fa3|decode)\./ && $3 + 0 > 0 && def == "" { def = $3; key = $1 }
        $1 == "*" && $4 + 0 > 0 { best = $4; bkey = $2 }
        END {
          if (def == "") def = "-"
          ratio = (cudnn > 0 && def + 0 > 0) ? sprintf("%.2fx", def / cudnn) : "-"
          if (best == "") { best = "-"; bkey = "" }
          printf "%-16s %5s %-28s %8s %8s %7s %8s %6s %6s  %s\n", name, round, at, (cudnn ? cudnn : "-"), def,
                 ratio, best, target, mhz, (bkey != "" ? bkey : key)
        }' "$log" >>"$rows"
    done
  done
  IFS=' '
  round=$((round + 1))
done

echo "== failures in $log"
grep -E "WRONG|failed|attntune bench:" "$log" | head -20
echo "== TFLOP/s, B2 N16 T=S=8192 unless named (default/cuDNN: the same run; MHz: the median SM clock at 80% of the power limit, else while busy)"
printf '%-16s %5s %-28s %8s %8s %7s %8s %6s %6s  %s\n' shape round binary cudnn default ratio best target MHz key
cat "$rows"
exit $rc
