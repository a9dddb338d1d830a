#!/bin/sh
# fa2_gpu.sh [BUILD_DIR] — the fa2 check on the GPU machine in one go: the GPU test of every listed
# variant, then the benchmark shapes of docs/perf.md ("## fa2") through `attntune bench`, with a
# short table printed last. Build first on the build machine:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 && scripts/devlibs.sh build
# Full logs go to $OUT (or ./gpu-logs). FA2_BENCH_ONLY=1 skips the test; FA2_QUICK=1 benches the
# 8k shapes only.
build=${1:-build}
out=${OUT:-gpu-logs}
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >"$out/nvidia-smi.txt" 2>&1
rc=0
if [ -z "${FA2_BENCH_ONLY:-}" ]; then
  "$build/tests/test_fa2_gpu" >"$out/test_fa2_gpu.log" 2>&1 || rc=1
  echo "== test_fa2_gpu (exit $rc)"
  grep -E "variants$|WRONG|failed|PASSED|FAILED|ERROR" "$out/test_fa2_gpu.log" | head -40
fi
bench() { # bench FLAGS... : one shape: naive, cuDNN and every listed fa2 variant
  "$build/attntune" bench --impl naive,cudnn,fa2 --dtype bf16 "$@" >>"$out/bench.log" 2>&1 || rc=1
}
: >"$out/bench.log"
bench --batch 2 --q-heads 16 --head-dim 128 --seq-len 8192 --reps 20
bench --batch 2 --q-heads 16 --head-dim 128 --seq-len 8192 --causal --reps 20
if [ -z "${FA2_QUICK:-}" ]; then
  for t in 128 256 512 1024 2048; do
    bench --batch 4 --q-heads 8 --head-dim 64 --seq-len $t --reps 200
  done
fi
echo "== nvidia-smi"; cat "$out/nvidia-smi.txt"
echo "== bench (full table per shape in bench.log)"
grep -E "^shape|^naive|^cudnn|^\* |WRONG|failed|attntune bench:" "$out/bench.log"
exit $rc
