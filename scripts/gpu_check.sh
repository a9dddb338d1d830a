#!/bin/sh
# gpu_check.sh [BUILD_DIR] — the GPU side of a check, in one go: the tests (GPU tests included),
# `attntune devices`, a tuning run of configs/quick.yaml, the codelab suite and its report, and the
# 8k benchmark table, printed last.
# Run on the GPU machine from the repository root after building on the build machine with
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 && scripts/devlibs.sh build
# Full logs go to $OUT (or ./gpu-logs). GPU_CHECK_SKIP_TUNE=1 and GPU_CHECK_SKIP_SUITE=1 skip those;
# GPU_CHECK_FP8=1 adds FP8-vs-bf16 benchmarks at T=S=8192, D 128 and 256.
build=${1:-build}
out=${OUT:-gpu-logs}
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
at="$build/attntune"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
  >"$out/nvidia-smi.txt" 2>&1
# The install test links statically against the build machine's -dev libraries; the GPU machine
# runs prebuilt binaries and has none, so it is left out unless CTEST_ARGS says otherwise.
timeout "${CTEST_TIMEOUT:-300}" ctest --test-dir "$build" -V ${CTEST_ARGS:--E ^install\$} >"$out/ctest.log" 2>&1
ctest_rc=$?
"$at" devices >"$out/devices.txt" 2>&1
tune_rc=skipped
if [ -z "${GPU_CHECK_SKIP_TUNE:-}" ]; then
  /usr/bin/time -f "wall %e s" timeout 240 "$at" tune configs/quick.yaml --db "$out/quick.db" \
    >"$out/tune.txt" 2>"$out/tune.err"
  tune_rc=$?
fi
suite_rc=skipped
if [ -z "${GPU_CHECK_SKIP_SUITE:-}" ]; then
  timeout "${SUITE_TIMEOUT:-300}" "$at" bench --suite codelab --db "$out/codelab.db" >"$out/suite.txt" 2>"$out/suite.err"
  suite_rc=$?
  "$at" report --db "$out/codelab.db" --format html --out "$out/codelab.html" 2>>"$out/suite.err"
  "$at" report --db "$out/codelab.db" --format text >"$out/report.txt" 2>>"$out/suite.err"
fi
timeout 60 "$at" bench --overhead --batch 1 --seq-len 128 --q-heads 8 --head-dim 64 >"$out/overhead.txt" 2>&1
for mask in "" --causal; do
  timeout 120 "$at" bench --impl naive,cudnn,default --batch 2 --seq-len 8192 --q-heads 16 \
    --head-dim 128 --reps 20 $mask >>"$out/bench.txt" 2>&1
done
# FP8 against bf16 on the same shapes (issue of the FP8 family): the default variant of each,
# next to cuDNN in the same dtype (for FP8 its FP8 graph, which writes FP8 output).
if [ -n "${GPU_CHECK_FP8:-}" ]; then
  for d in 128 256; do
    for dt in bf16 e4m3 e5m2; do
      timeout 120 "$at" bench --impl cudnn,default --dtype $dt --batch 2 --seq-len 8192 --q-heads 16 \
        --head-dim $d --reps 20 >>"$out/fp8.txt" 2>&1
    done
  done
fi
echo "== devices"; cat "$out/devices.txt"
echo "== ctest (exit $ctest_rc; full log in ctest.log)"
grep -E "Test +#[0-9]+:|tests passed|FAILED|Failed|^planted|^killed|^after|^ok:|^FP8:" "$out/ctest.log"
echo "== tune configs/quick.yaml (exit $tune_rc)"
tail -n 3 "$out/tune.err"; cat "$out/tune.txt"
echo "== bench --suite codelab (exit $suite_rc; report in report.txt, codelab.html)"
tail -n 4 "$out/suite.err"; head -n 30 "$out/report.txt"
echo "== library overhead"; cat "$out/overhead.txt"
[ -f "$out/fp8.txt" ] && { echo "== FP8 vs bf16"; grep -E "^shape|^cudnn|^fa[23]\.|refused|unsupported" "$out/fp8.txt"; }
echo "== bench"; cat "$out/bench.txt"
[ "$ctest_rc" = 0 ]
