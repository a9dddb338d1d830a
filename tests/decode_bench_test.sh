#!/bin/sh
# decode_bench_test.sh SOURCE_DIR — scripts/decode_bench.sh against a stand-in attntune (no GPU):
# per shape and K/V dtype a cuDNN, a default and a best row with the K/V bandwidth; FP8 K/V's
# tokens/s over bf16's at S >= 16k; with BASE, one row set per binary and round, each naming both,
# a single KEY labelled 'key', and the ratio taken from this build's times.
src=$1
. "$(dirname "$0")/script_test_lib.sh"
mkdir -p "$dir/build" "$dir/base"
# The stand-in prints a bench table as attntune does: cuDNN, then the variants, the starred best.
# bf16 K/V takes 250 us, e4m3 K/V 125 us in build and 150 us in base (cuDNN 300 us).
for b in build base; do
  f=0.1250; [ $b = base ] && f=0.1500
  cat >"$dir/$b/attntune" <<EOS
#!/bin/sh
t=0.2500; case "\$*" in *e4m3*) t=$f ;; esac
echo "impl                                            time_ms   KV TB/s   rel_err  note"
case "\$*" in *cudnn*) echo "cudnn                                            0.3000      1.00  2.3e-03  cudnn" ;; esac
echo "decode.bf16.d128.none.g4.bm1.bn128.w4.s3.sp4.$b     \$t      4.00  2.3e-03  174 regs"
echo "* decode.bf16.d128.none.g4.bm1.bn128.w4.s3.sp4.$b     \$t      4.00         -  fastest decode variant"
EOS
  chmod +x "$dir/$b/attntune"
done
run() { (cd "$src" && OUT="$dir/out" "$@" sh scripts/decode_bench.sh "$dir/build" 2>&1); }
# B8 S16k Nkv 8 D 128: 2 * 8 * 8 * 16384 * 128 * 2 bytes = 536.9 MB in 250 us = 2.147 TB/s
out=$(run env SHAPES="8 1 16384 none")
expect "bf16 cuDNN row" '^B8 T1 S16384 none bf16 +cudnn +300\.00 +1\.790 *$' "$out"
expect "bf16 default row, its key" '^B8 T1 S16384 none bf16 +default +250\.00 +2\.147 +decode\..*\.build$' "$out"
expect "e4m3 best row, half the bytes" '^B8 T1 S16384 none e4m3 +best +125\.00 +2\.147 +decode\..*\.build$' "$out"
expect "FP8 K/V over bf16 K/V" '^B=8 T=1 S=16384 none +250\.00 +125\.00 +2\.00x$' "$out"
count "bf16: cuDNN, default, best; e4m3: default, best" '^B8 T1 S16384 none (bf16|e4m3) ' "$out" 5
out=$(run env SHAPES="8 1 16384 none" BASE="$dir/base/attntune" IMPLS=decode.k KV_IMPLS=decode.k)
expect "A/B rows name binary and round; one KEY is 'key'" '^B8 T1 S16384 none e4m3 base r2 +key +150\.00 ' "$out"
count "two rounds of two binaries, key and best each" '^B8 T1 S16384 none (bf16|e4m3) (base|build) r[12] ' "$out" 16
expect "the ratio is this build's" '^B=8 T=1 S=16384 none +250\.00 +125\.00 +2\.00x$' "$out"
finish
