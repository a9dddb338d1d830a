#!/bin/sh
# h200_bars.sh PHASE [BUILD_DIR] — the "Shown by" runs of issues #14 (fa3 prefill) and #15
# (decode), whose bars are the H200's, as three calls of under ten minutes on the GPU machine:
#   bench    scripts/decode_bench.sh at #15's rows (Nkv 8), then at GQA 8 (Nkv 4: 128 packed
#            rows at T16, 64 at T8), cuDNN and the defaults; then scripts/prefill_bench.sh, one
#            process a shape timing each implementation in three rounds (BENCH_ROUNDS), their
#            medians: #15's TB/s, B=1 S=4k microseconds and FP8 tokens/s, #14's TFLOP/s; then
#            scripts/hbm_read_probe.cu (built with the machine's nvcc): #15's floors on the card
#   prefill  `attntune tune configs/llm-prefill.yaml` into an empty cache, then `attntune report`:
#            #14's geometric mean of tuned over cuDNN and the shapes won
#   decode   the same with configs/decode.yaml: #15's shapes won and FP8 tokens/s
# Runs nothing and exits 3 unless the GPU is an H200: the bars are that card's, and a call that
# asked for one may get another. ANY_GPU=1 runs anyway; its figures are then that card's. Full
# logs go to $OUT (or ./gpu-logs); each phase prints its table last.
phase=${1:-}
build=${2:-build}
out=${OUT:-gpu-logs}
case "$phase" in
bench | prefill | decode) ;;
*)
  echo "usage: h200_bars.sh bench|prefill|decode [BUILD_DIR]" >&2
  exit 2
  ;;
esac
[ -x "$build/attntune" ] || { echo "h200_bars.sh: no attntune in '$build' (build it first)" >&2; exit 2; }
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
echo "== GPU: ${gpu:-none found}"
case "$gpu" in
*H200*) ;;
*)
  if [ -z "${ANY_GPU:-}" ]; then
    echo "h200_bars.sh: the GPU is '${gpu:-none}', not an H200; nothing run (ANY_GPU=1 runs anyway)" >&2
    exit 3
  fi
  ;;
esac

tune_and_report() { # CONFIG
  db="$out/$phase.db"
  rm -f "$db"
  timeout "${TUNE_TIMEOUT:-540}" "$build/attntune" tune "$1" --db "$db" >"$out/tune-$phase.txt" 2>&1
  rc=$?
  echo "== tune $1: exit $rc, $(grep -c . "$out/tune-$phase.txt") lines of log in $out/tune-$phase.txt"
  "$build/attntune" report --db "$db" --format md --out "$out/report-$phase.md" || rc=1
  # Shapes where the tuned kernel beats cuDNN (#14: 3/4 of them; #15: 90%): the sum of the
  # report's "tuned faster" column over its groups; then the report's closing sections (the
  # geometric means, and FP8 K/V's tokens per second).
  awk -F'|' '/^### Geometric/ { on = 1; next } /^### / { on = 0 }
    on && /^\| dtype/ { for (i = 1; i <= NF; i++) if ($i ~ /tuned faster/) col = i; next }
    on && col && split($col, f, " of ") == 2 { won += f[1]; n += f[2] }
    END { printf "== tuned faster than cuDNN on %d of the %d shapes with a cuDNN time\n", won, n }' \
    "$out/report-$phase.md"
  sed -n '/^### Geometric/,$p' "$out/report-$phase.md" | head -n 60
  return $rc
}

case "$phase" in
bench)
  rc=0
  IMPLS=cudnn,default KV_IMPLS=default sh "$(dirname "$0")/decode_bench.sh" "$build" >"$out/decode-nkv8.txt" 2>&1 || rc=1
  SHAPES="8 16 4096 causal-br;8 8 16384 causal-br;8 8 65536 causal-br;8 1 16384 none" KV_HEADS=4 \
    IMPLS=cudnn,default KV_IMPLS=default sh "$(dirname "$0")/decode_bench.sh" "$build" >"$out/decode-nkv4.txt" 2>&1 || rc=1
  ROUNDS=1 BENCH_ROUNDS=${BENCH_ROUNDS:-3} sh "$(dirname "$0")/prefill_bench.sh" "$build" >"$out/prefill.txt" 2>&1 || rc=1
  # #15's floors on this card: scripts/hbm_read_probe.cu built here (nvcc, where the machine has
  # it), its plain reads of each K/V size and the one-token kernel's bare stream (t1)
  probe=${TMPDIR:-/tmp}/hbm_read_probe.$$
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [ -x "$nvcc" ] &&
    "$nvcc" -O3 -arch=sm_90a -o "$probe" "$(dirname "$0")/hbm_read_probe.cu" -lcuda >"$out/probe-build.txt" 2>&1; then
    { timeout 120 "$probe" && timeout 120 "$probe" t1; } >"$out/probe.txt" 2>&1 || rc=1
    rm -f "$probe"
  else
    echo "no nvcc, or the probe did not build: $out/probe-build.txt" >"$out/probe.txt"
  fi
  for f in decode-nkv8 decode-nkv4 prefill; do
    echo "== $f"
    tail -n 22 "$out/$f.txt"
  done
  echo "== probe (floors: an empty launch, plain reads with 264 x 512 threads, the T=1 kernel's bare cp.async stream)"
  grep -E "empty launch|^ +[0-9.]+ +264 +512 |^ +B Nkv|cp.async|no nvcc" "$out/probe.txt"
  exit $rc
  ;;
prefill) tune_and_report configs/llm-prefill.yaml ;;
decode) tune_and_report configs/decode.yaml ;;
esac
