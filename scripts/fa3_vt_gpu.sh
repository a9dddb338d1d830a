#!/bin/sh
# fa3_vt_gpu.sh [BUILD_DIR] — the check of fa3's FP8 kernels with V^T ahead (.vt, docs/perf.md
# "v11") on the GPU machine in one go: the GPU test that runs every listed FP8 variant against
# the naive reference (.vt included: S not a multiple of 32 or of block_n, T != S, GQA, lse,
# padded and head-major V), then cuDNN and every fa3 variant on FP8 shapes, and a table last: per
# shape, cuDNN, the fastest in-CTA (v5), .vt and producer-transposing (v9) variant, from the same
# call. Build first on the build machine:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 && scripts/devlibs.sh build
# Full logs go to $OUT (or ./gpu-logs). VT_BENCH_ONLY=1 skips the test.
build=${1:-build}
out=${OUT:-gpu-logs}
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >"$out/nvidia-smi.txt" 2>&1
rc=0
if [ -z "${VT_BENCH_ONLY:-}" ]; then
  "$build/tests/test_fp8_gpu" >"$out/test_fp8_gpu.log" 2>&1 || rc=1
  echo "== test_fp8_gpu (exit $rc; .vt lines: $(grep -c '\.vt' "$out/test_fp8_gpu.log"))"
  grep -E "variants$|WRONG|failed|PASSED|FAILED|ERROR" "$out/test_fp8_gpu.log" | head -40
fi
: >"$out/bench.log"
summary=""
bench() { # bench NAME FLAGS... : cuDNN and every fa3 variant of one FP8 shape
  name=$1
  shift
  "$build/attntune" bench --impl cudnn,fa3 --reps 20 "$@" >"$out/bench-$name.log" 2>&1 || rc=1
  cat "$out/bench-$name.log" >>"$out/bench.log"
  summary="$summary$(awk -v name="$name" '
    $1 == "cudnn" { cudnn = $3 }
    $1 ~ /^fa3\./ && $3 + 0 > 0 {
      if ($1 ~ /\.vt/) { if ($3 + 0 > vt) { vt = $3 + 0; vk = $1 } }
      else if ($1 ~ /\.wspp|\.ws/) { if ($3 + 0 > ws) { ws = $3 + 0; wk = $1 } }
      else if ($3 + 0 > cta) { cta = $3 + 0; ck = $1 }
    }
    END { printf "%-12s cudnn %7s  v5 %7.1f (%s)  vt %7.1f (%s)  v9 %7.1f (%s)\n", name, cudnn, cta, ck, vt, vk, ws, wk }' \
    "$out/bench-$name.log")
"
}
bench e4m3-d128 --dtype e4m3 --batch 2 --q-heads 16 --head-dim 128 --seq-len 8192
bench e4m3-d256 --dtype e4m3 --batch 2 --q-heads 16 --head-dim 256 --seq-len 8192
bench e4m3-d128-c --dtype e4m3 --batch 2 --q-heads 16 --head-dim 128 --seq-len 8192 --causal
bench e5m2-d128 --dtype e5m2 --batch 2 --q-heads 16 --head-dim 128 --seq-len 8192
bench e4m3-2k-gqa --dtype e4m3 --batch 1 --q-heads 32 --kv-heads 8 --head-dim 128 --seq-len 2048 --causal
echo "== nvidia-smi"; cat "$out/nvidia-smi.txt"
echo "== failures in bench.log"; grep -E "WRONG|failed|attntune bench:" "$out/bench.log" | head -20
echo "== TFLOP/s, one call per shape (full tables in bench-*.log)"
printf '%s' "$summary"
exit $rc
