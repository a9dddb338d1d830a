#!/bin/sh
# fa3_pers_gpu.sh [BUILD_DIR] — the check of fa3's persistent causal kernels (.pers, docs/perf.md
# "v10") on the GPU machine in one go: the GPU test that runs every listed 16-bit variant against
# the naive reference (its last four cases have more work tiles than SMs), then cuDNN and every
# fa3 variant on causal shapes, and a table last: per shape, cuDNN, the fastest persistent and
# the fastest non-persistent warp-specialized variant, from the same call. Build first on the
# build machine:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 && scripts/devlibs.sh build
# Full logs go to $OUT (or ./gpu-logs). PERS_BENCH_ONLY=1 skips the test.
build=${1:-build}
out=${OUT:-gpu-logs}
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >"$out/nvidia-smi.txt" 2>&1
rc=0
if [ -z "${PERS_BENCH_ONLY:-}" ]; then
  "$build/tests/test_fa2_gpu" >"$out/test_fa2_gpu.log" 2>&1 || rc=1
  echo "== test_fa2_gpu (exit $rc; .pers lines: $(grep -c '\.pers' "$out/test_fa2_gpu.log"))"
  grep -E "variants$|WRONG|failed|PASSED|FAILED|ERROR" "$out/test_fa2_gpu.log" | head -40
fi
: >"$out/bench.log"
summary=""
bench() { # bench NAME FLAGS... : cuDNN and every fa3 variant of one causal shape
  name=$1
  shift
  "$build/attntune" bench --impl cudnn,fa3 --reps 20 "$@" >"$out/bench-$name.log" 2>&1 || rc=1
  cat "$out/bench-$name.log" >>"$out/bench.log"
  summary="$summary$(awk -v name="$name" '
    $1 == "cudnn" { cudnn = $3 }
    $1 ~ /^fa3\./ && $3 + 0 > 0 {
      if ($1 ~ /\.pers/) { if ($3 + 0 > pers) { pers = $3 + 0; pk = $1 } }
      else if ($1 ~ /\.wspp|\.ws/) { if ($3 + 0 > ws) { ws = $3 + 0; wk = $1 } }
    }
    END { printf "%-14s cudnn %7s  ws %7.1f (%s)  pers %7.1f (%s)  pers/ws %.3f\n", name, cudnn, ws, wk, pers, pk,
          (ws > 0 ? pers / ws : 0) }' "$out/bench-$name.log")
"
}
bench 8k-d128 --batch 2 --q-heads 16 --head-dim 128 --seq-len 8192 --causal
bench 8k-d64 --batch 2 --q-heads 16 --head-dim 64 --seq-len 8192 --causal
bench 2k-gqa4 --batch 1 --q-heads 32 --kv-heads 8 --head-dim 128 --seq-len 2048 --causal
bench 1k-gqa4 --batch 1 --q-heads 32 --kv-heads 8 --head-dim 128 --seq-len 1024 --causal
bench 2k-of-8k-br --batch 1 --q-heads 32 --kv-heads 8 --head-dim 128 --q-len 2048 --kv-len 8192 --causal-br
echo "== nvidia-smi"; cat "$out/nvidia-smi.txt"
echo "== failures in bench.log"; grep -E "WRONG|failed|attntune bench:" "$out/bench.log" | head -20
echo "== TFLOP/s, one call per shape (full tables in bench-*.log)"
printf '%s' "$summary"
exit $rc
