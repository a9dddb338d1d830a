#!/bin/sh
# fa3_form_gpu.sh FORM [BUILD_DIR] — the check of one form of fa3's warp-specialized kernel on the
# GPU machine in one go: the GPU test that runs every listed variant of its dtypes against the
# naive reference, then cuDNN and every fa3 variant on the form's shapes, and a table last: per
# shape, cuDNN and the fastest in-CTA, warp-specialized and FORM variant, from the same call.
#   pers  persistent causal kernels (.pers, docs/perf.md "v10"): test_fa2_gpu, causal 16-bit shapes
#         (its last four cases have more work tiles than SMs)
#   vt    FP8 with V^T ahead (.vt, "v11"): test_fp8_gpu (S not a multiple of 32 or of block_n,
#         T != S, GQA, lse, padded and head-major V), FP8 shapes; in-CTA is v5, ws is v9
# Build first on the build machine:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 && scripts/devlibs.sh build
# Full logs go to $OUT (or ./gpu-logs). BENCH_ONLY=1 skips the test.
form=${1:-}
build=${2:-build}
case "$form" in
  pers) test=test_fa2_gpu ;;
  vt) test=test_fp8_gpu ;;
  *) echo "usage: fa3_form_gpu.sh pers|vt [BUILD_DIR]" >&2; exit 2 ;;
esac
out=${OUT:-gpu-logs}
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >"$out/nvidia-smi.txt" 2>&1
rc=0
if [ -z "${BENCH_ONLY:-}" ]; then
  "$build/tests/$test" >"$out/$test.log" 2>&1 || rc=1
  echo "== $test (exit $rc; .$form lines: $(grep -c "\\.$form" "$out/$test.log"))"
  grep -E "variants$|WRONG|failed|PASSED|FAILED|ERROR" "$out/$test.log" | head -40
fi
: >"$out/bench.log"
summary=""
bench() { # bench NAME FLAGS... : cuDNN and every fa3 variant of one shape
  name=$1
  shift
  "$build/attntune" bench --impl cudnn,fa3 --reps 20 "$@" >"$out/bench-$name.log" 2>&1 || rc=1
  cat "$out/bench-$name.log" >>"$out/bench.log"
  summary="$summary$(awk -v name="$name" -v form="$form" '
    $1 == "cudnn" { cudnn = $3 }
    $1 ~ /^fa3\./ && $3 + 0 > 0 {
      if (index($1, "." form)) { if ($3 + 0 > f) { f = $3 + 0; fk = $1 } }
      else if ($1 ~ /\.wspp|\.ws/) { if ($3 + 0 > ws) { ws = $3 + 0; wk = $1 } }
      else if ($3 + 0 > cta) { cta = $3 + 0; ck = $1 }
    }
    END { printf "%-12s cudnn %7s  in-CTA %7.1f (%s)  ws %7.1f (%s)  %s %7.1f (%s)  %s/ws %.3f\n", name, cudnn,
                 cta, ck, ws, wk, form, f, fk, form, (ws > 0 ? f / ws : 0) }' "$out/bench-$name.log")
"
}
if [ "$form" = pers ]; then
  bench 8k-d128 --batch 2 --q-heads 16 --head-dim 128 --seq-len 8192 --causal
  bench 8k-d64 --batch 2 --q-heads 16 --head-dim 64 --seq-len 8192 --causal
  bench 2k-gqa4 --batch 1 --q-heads 32 --kv-heads 8 --head-dim 128 --seq-len 2048 --causal
  bench 1k-gqa4 --batch 1 --q-heads 32 --kv-heads 8 --head-dim 128 --seq-len 1024 --causal
  bench 2k-of-8k-br --batch 1 --q-heads 32 --kv-heads 8 --head-dim 128 --q-len 2048 --kv-len 8192 --causal-br
else
  bench e4m3-d128 --dtype e4m3 --batch 2 --q-heads 16 --head-dim 128 --seq-len 8192
  bench e4m3-d256 --dtype e4m3 --batch 2 --q-heads 16 --head-dim 256 --seq-len 8192
  bench e4m3-d128-c --dtype e4m3 --batch 2 --q-heads 16 --head-dim 128 --seq-len 8192 --causal
  bench e5m2-d128 --dtype e5m2 --batch 2 --q-heads 16 --head-dim 128 --seq-len 8192
  bench e4m3-2k-gqa --dtype e4m3 --batch 1 --q-heads 32 --kv-heads 8 --head-dim 128 --seq-len 2048 --causal
fi
echo "== nvidia-smi"; cat "$out/nvidia-smi.txt"
echo "== failures in bench.log"; grep -E "WRONG|failed|attntune bench:" "$out/bench.log" | head -20
echo "== TFLOP/s, one call per shape (full tables in bench-*.log)"
printf '%s' "$summary"
exit $rc
