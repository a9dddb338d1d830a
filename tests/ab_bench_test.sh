#!/bin/sh
# ab_bench_test.sh SOURCE_DIR — scripts/ab_bench.sh against two stand-in attntune binaries (no
# GPU): each round runs A then B with the same flags, the table matches rows by key across the
# binaries (a key only one lists reads '-'), B/A is the ratio of the means, the '*' best row and
# lines outside the table are left out, a failed run exits 1 and says so, and bad arguments exit 2.
src=$1
. "$(dirname "$0")/script_test_lib.sh"
mkdir -p "$dir/a" "$dir/b"
# The stand-ins print a bench table as attntune does. A: cuDNN 500, KEY1 600, KEY2 700 plus the
# round (counted in $dir/<side>.n); B: cuDNN 500, KEY1 660, its own KEY3 800, and no KEY2. Each
# records its arguments. FAIL_B=1 makes B exit 1 after printing nothing.
for side in a b; do
  cat >"$dir/$side/attntune" <<EOS
#!/bin/sh
echo "\$*" >>"$dir/$side.args"
n=\$(( \$(cat "$dir/$side.n" 2>/dev/null || echo 0) + 1 )); echo \$n >"$dir/$side.n"
[ "$side" = b ] && [ -n "\$FAIL_B" ] && exit 1
echo "shape: B=2 T=8192 S=8192 Nq=16 Nkv=16 D=64 e4m3 mask=none  (550 GFLOP)"
echo "device: NVIDIA H200 (sm_90a), 1 input set, warm-up 10, graph replay of 10 launches, seed 1"
echo "impl                                            time_ms   TFLOP/s   rel_err  note"
echo "cudnn                                            1.0000     500.0  3.7e-02  cudnn 9.19.0"
if [ "$side" = a ]; then
  echo "fa3.KEY1     1.0000     600.0  2.6e-02  168 regs"
  echo "fa3.KEY2     1.0000     70\$n.0  2.6e-02  168 regs"
else
  echo "fa3.KEY1     1.0000     660.0  2.6e-02  168 regs"
  echo "fa3.KEY3     1.0000     800.0  2.6e-02  168 regs"
fi
echo "* fa3.KEY3     1.0000     999.0         -  fastest variant"
EOS
  chmod +x "$dir/$side/attntune"
done
run() { (cd "$src" && OUT="$dir/out" "$@" 2>&1); }
out=$(run env ROUNDS=2 sh scripts/ab_bench.sh "$dir/a/attntune" "$dir/b/attntune" --impl cudnn,x --head-dim 64)
same "exit 0" $? 0
expect "the GPU the rates are from" '^== device: NVIDIA H200 \(sm_90a\) ' "$out"
expect "header: two rounds of A and B, then B/A" '^impl +A1 +B1 +A2 +B2 +B/A$' "$out"
expect "cuDNN row, ratio 1" '^cudnn +500\.0 +500\.0 +500\.0 +500\.0 +1\.000$' "$out"
expect "a key of both: B's mean over A's" '^fa3\.KEY1 +600\.0 +660\.0 +600\.0 +660\.0 +1\.100$' "$out"
expect "A's own key, each round its own rate" '^fa3\.KEY2 +701\.0 +- +702\.0 +- +-$' "$out"
expect "B's own key" '^fa3\.KEY3 +- +800\.0 +- +800\.0 +-$' "$out"
count "no '*' row" '999' "$out" 0
count "each binary ran twice with the flags" '^bench --impl cudnn,x --head-dim 64$' "$(cat "$dir/a.args" "$dir/b.args")" 4
expect "the log has each run" '^== round 2 B ' "$(cat "$dir/out/ab_bench.txt")"

out=$(run env ROUNDS=1 FAIL_B=1 sh scripts/ab_bench.sh "$dir/a/attntune" "$dir/b/attntune" --head-dim 64)
same "a failed run exits 1" $? 1
expect "and says which" 'round 1 B failed' "$out"
out=$(run sh scripts/ab_bench.sh "$dir/a/attntune")
same "one binary exits 2" $? 2
expect "with the usage" '^usage: ab_bench.sh BIN_A BIN_B' "$out"
out=$(run sh scripts/ab_bench.sh "$dir/a/attntune" "$dir/nothing/attntune")
same "a missing binary exits 2" $? 2
expect "and names it" "'$dir/nothing/attntune' is not an executable attntune" "$out"
finish
