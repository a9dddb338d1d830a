#!/bin/sh
# skip_test.sh PROBE TEST_DIR — ctest shows a test program as skipped only when it exits 77
# (SKIP_RETURN_CODE). Checks that tu_run_group exits 77 exactly when every test skipped (the
# probe's modes), and that every GPU test program exits 77 where it sees no GPU: CUDA_VISIBLE_DEVICES
# is emptied, so this holds on a machine with a GPU too.
probe=$1 dir=$2
fails=0
check() { # check WANT DESCRIPTION COMMAND...
  want=$1 what=$2
  shift 2
  out=$("$@" 2>&1)
  got=$?
  if [ "$got" = "$want" ]; then
    echo "ok: $what -> $got"
  else
    echo "FAIL: $what exited $got, expected $want:"; echo "$out"; fails=$((fails + 1))
  fi
}
check 77 "every test skipped" "$probe" skip
check 0 "one test passed, one skipped" "$probe" mixed
check 1 "one test skipped, one failed" "$probe" fail
out=$("$probe" setup-fails 2>&1); got=$?
if [ "$got" = 0 ] || [ "$got" = 77 ]; then
  echo "FAIL: a failed group setup exited $got:"; echo "$out"; fails=$((fails + 1))
else
  echo "ok: a failed group setup -> $got"
fi
n=0
for t in "$dir"/test_*_gpu; do
  [ -x "$t" ] || continue
  n=$((n + 1))
  check 77 "$(basename "$t") without a visible GPU" env CUDA_VISIBLE_DEVICES= "$t"
done
if [ "$n" -lt 5 ]; then echo "FAIL: found $n GPU test programs in $dir, expected at least 5"; fails=$((fails + 1)); fi
# Seeds: a fresh one is printed with the line that replays it; replaying draws the same inputs;
# a seed that is no number is refused.
first=$("$probe" seed 2>&1)
seed=$(printf '%s\n' "$first" | sed -n 's/^seed \([0-9]*\) (ATTNTUNE_TEST_SEED=\1 replays it)$/\1/p')
again=$(ATTNTUNE_TEST_SEED=$seed "$probe" seed 2>&1)
draws() { printf '%s\n' "$1" | grep '^draws '; }
if [ -z "$seed" ]; then
  echo "FAIL: no seed printed:"; echo "$first"; fails=$((fails + 1))
elif [ "$(draws "$first")" != "$(draws "$again")" ] || ! printf '%s' "$again" | grep -q "seed $seed (from ATTNTUNE_TEST_SEED)"; then
  echo "FAIL: ATTNTUNE_TEST_SEED=$seed did not replay:"; echo "$first"; echo "$again"; fails=$((fails + 1))
else
  echo "ok: ATTNTUNE_TEST_SEED=$seed replays $(draws "$first")"
fi
other=$(ATTNTUNE_TEST_SEED=$((seed % 1000 + 1)) "$probe" seed 2>&1)
if [ "$(draws "$other")" = "$(draws "$first")" ]; then
  echo "FAIL: another seed drew the same inputs"; fails=$((fails + 1))
fi
check 2 "ATTNTUNE_TEST_SEED=12ab" env ATTNTUNE_TEST_SEED=12ab "$probe" seed
exit $fails
