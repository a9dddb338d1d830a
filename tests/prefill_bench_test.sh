#!/bin/sh
# prefill_bench_test.sh SOURCE_DIR — scripts/prefill_bench.sh against a stand-in attntune and
# nvidia-smi (no GPU): the table's rows take cuDNN's and the default's TFLOP/s from the right
# lines, the ratio, the starred best with fused, the median clock at the power cap (else while busy), one row per shape, round and
# binary with BASE; an unknown shape name exits 2 and names it.
src=$1
. "$(dirname "$0")/script_test_lib.sh"
mkdir -p "$dir/build" "$dir/base" "$dir/bin"
# The stand-in prints a bench table as attntune does: cuDNN first, then the default's key row,
# then (for --impl ...fused) a listed variant and the starred best. TFLOP/s: cuDNN 600 (or 1000
# for e4m3), the default 660 (1100), its binary's name on the key so the rows can be told apart.
for b in build base; do
  cat >"$dir/$b/attntune" <<EOS
#!/bin/sh
dt=bf16; impl=""
while [ \$# -gt 0 ]; do case "\$1" in --dtype) dt=\$2; shift ;; --impl) impl=\$2; shift ;; esac; shift; done
c=600.0; d=660.0; [ "\$dt" = e4m3 ] && c=1000.0 d=1100.0
# VARY: the default's TFLOP/s counts the runs (661, 662, ...), so that rows can be told apart.
if [ -n "\$VARY" ]; then n=\$(( \$(cat "\$OUT/.runs" 2>/dev/null || echo 0) + 1 )); echo \$n >"\$OUT/.runs"; d=\$((660 + n)).0; fi
# As a real run does, last until the clock sampler has its samples (up to 10 s): on a loaded
# machine the stand-in nvidia-smi may start after a stand-in bench that returned at once.
for i in \$(seq 100); do
  for f in "\$OUT"/.clocks.*; do [ -s "\$f" ] && break 2; done
  sleep 0.1
done
echo "impl                                            time_ms   TFLOP/s   rel_err  note"
echo "cudnn                                            1.0000     \$c  2.3e-03  cudnn"
echo "fa3.\$dt.d128.none.g1.bm128.bn224.w8.s2.ws.$b     1.0000     \$d  2.3e-03  168 regs"
case "\$impl" in *fused*) echo "fa3.\$dt.other.$b     1.0000     700.0  2.3e-03  x"
  echo "* fa3.\$dt.best.$b     1.0000     777.5         -  fastest variant" ;; esac
EOS
  chmod +x "$dir/$b/attntune"
done
# Samples at the power cap at 1500, 1700, 1600 MHz (median 1600) among idle ones and busy ones
# at low power (the naive reference verifying), all at 1980 (with those busy ones the median
# would be 1700); then the stand-in waits to be killed. A second stand-in never nears its cap:
# the median of the busy samples (1650).
cat >"$dir/bin/nvidia-smi" <<'EOS'
#!/bin/sh
if [ -n "$LOW_POWER" ]; then printf '0, 1980, 80, 700\n100, 1600, 300, 700\n95, 1700, 310, 700\n99, 1650, 320, 700\n'
else printf '0, 1980, 80, 700\n100, 1500, 690, 700\n97, 1700, 600, 700\n100, 1980, 210, 700\n0, 1980, 75, 700\n100, 1600, 700, 700\n100, 1980, 250, 700\n12, 1980, 90, 700\n'; fi
exec sleep 30
EOS
chmod +x "$dir/bin/nvidia-smi"
run() { (cd "$src" && PATH="$dir/bin:$PATH" OUT="$dir/out" "$@" sh scripts/prefill_bench.sh "$dir/build" 2>&1); }
out=$(run env SHAPES="bf16-d128;e4m3-d256" ROUNDS=1)
expect "bf16 row: cuDNN, default, 1.10x, target 720, median clock" \
  '^bf16-d128 +1 +[^ ]*build/attntune +600\.0 +660\.0 +1\.10x +- +720 +1600 +fa3\.bf16\..*\.build$' "$out"
expect "e4m3 row" '^e4m3-d256 +1 .* +1000\.0 +1100\.0 +1\.10x +- +1200 ' "$out"
count "one row per shape" '^(bf16|e4m3)-' "$out" 2
out=$(run env SHAPES="bf16-d128" ROUNDS=1 LOW_POWER=1)
expect "far from the power cap: the median clock while busy" '^bf16-d128 +1 .* +720 +1650 ' "$out"
out=$(run env SHAPES="gqa-16k-causal" ROUNDS=2 BASE="$dir/base/attntune" IMPLS=cudnn,default,fused)
expect "with fused: the starred best and its key" '^gqa-16k-causal +1 +[^ ]*base/attntune .* 777\.5 +- +1600 +fa3\.bf16\.best\.base$' "$out"
count "two rounds of two binaries" '^gqa-16k-causal ' "$out" 4
expect "BASE runs first in a round" 'base/attntune' "$(printf '%s\n' "$out" | grep -E '^gqa-16k-causal +2 ' | head -1)"
out=$(run env SHAPES="bf16-d128;bf16-d128" ROUNDS=1 VARY=1)
expect "a shape named twice: its first run's row" '^bf16-d128 +1 .* +661\.0 +1\.10x ' "$out"
expect "and its second run's own" '^bf16-d128 +1 .* +662\.0 +1\.10x ' "$out"
rm -f "$dir/out/.runs"
out=$(run env SHAPES="bf16-d999"); rc=$?
same "an unknown shape exits 2" "$rc" 2
expect "and names it" "unknown shape 'bf16-d999'" "$out"
finish
