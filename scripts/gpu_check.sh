#!/bin/sh
# gpu_check.sh [BUILD_DIR] — the GPU side of a check, in one go: environment, tests, devices.
# Run on the GPU machine from the repository root after building on the build machine with
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 && scripts/devlibs.sh build
# Full logs go to $OUT (or ./gpu-logs); a short summary is printed last.
build=${1:-build}
out=${OUT:-gpu-logs}
mkdir -p "$out"
cudnn919=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
export LD_LIBRARY_PATH="$PWD/$build/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -d "$cudnn919" ] && [ -z "${ATTNTUNE_CUDNN:-}" ] && export ATTNTUNE_CUDNN="$cudnn919"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
  >"$out/nvidia-smi.txt" 2>&1
ctest --test-dir "$build" -V ${CTEST_ARGS:-} >"$out/ctest.log" 2>&1
ctest_rc=$?
"$build/attntune" devices >"$out/devices.txt" 2>&1
echo "== devices"; cat "$out/devices.txt"
echo "== ctest (exit $ctest_rc; full log in ctest.log)"
grep -E "Test +#[0-9]+:|tests passed|FAILED|Failed" "$out/ctest.log" | grep -v "^test [0-9]*$"
exit $ctest_rc
