#!/bin/sh
# cudnn_gpu_check.sh [BUILD_DIR] — the GPU side of the cuDNN check in one go: the FP8 conversion
# test, the cuDNN-vs-naive test, then the cuDNN benchmark table (printed last). Build first, on
# the build machine:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 && scripts/devlibs.sh build
# Full logs go to $OUT (or ./gpu-logs). BENCH_ARGS is passed to bench_cudnn (e.g. --quick).
set -u
build=${1:-build}
out=${OUT:-gpu-logs}
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv >"$out/nvidia-smi.txt" 2>&1
ls /opt/torch/.venv/lib/python3.12/site-packages/nvidia "$cudnn919" >>"$out/nvidia-smi.txt" 2>&1
"$build/tests/test_fp8" >"$out/test_fp8.log" 2>&1
fp8_rc=$?
# cuDNN's own warnings and errors go to a file, for when a graph is refused.
CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG="$out/cudnn_test.log" "$build/tests/test_cudnn_gpu" \
  >"$out/test_cudnn_gpu.log" 2>&1
cudnn_rc=$?
# SM clock and power while the benchmark runs (a repeat that is slower than the first timing
# usually shows up here as a lower clock)
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 \
  >"$out/clocks.csv" 2>&1 &
sampler=$!
"$build/tests/bench_cudnn" ${BENCH_ARGS:-} >"$out/bench_cudnn.log" 2>&1
bench_rc=$?
kill "$sampler" 2>/dev/null
echo "== nvidia-smi"; cat "$out/nvidia-smi.txt"
echo "== test_fp8 (exit $fp8_rc)"; tail -n 3 "$out/test_fp8.log"
echo "== test_cudnn_gpu (exit $cudnn_rc)"; grep -v "^\[ *RUN\|^\[ *OK" "$out/test_cudnn_gpu.log" | head -c 6000
echo "== SM clock during the benchmark (MHz: min, max; W: max)"
awk -F', ' '{ c = $2 + 0; p = $3 + 0; if (c > 0) { if (!n++ || c < lo) lo = c; if (c > hi) hi = c; if (p > pw) pw = p } }
  END { print lo, hi, pw }' "$out/clocks.csv"
echo "== bench_cudnn (exit $bench_rc)"; tail -n 18 "$out/bench_cudnn.log"
[ $fp8_rc -eq 0 ] && [ $cudnn_rc -eq 0 ] && [ $bench_rc -eq 0 ]
