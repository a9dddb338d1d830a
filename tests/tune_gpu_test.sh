#!/bin/sh
# tune_gpu_test.sh ATTNTUNE SQL_EXEC — the tuning run end to end on a GPU (skips, exit 77, without one):
#  1. a planted crashing candidate is recorded as crashed and the run still completes;
#  2. kill -9 in the middle, rerun: trials committed before the kill are kept and not redone;
#  3. Ctrl-C: the trial in flight finishes and a rerun completes;
#  4. FP8: cuDNN's FP8 graph is the baseline, never the best;
#  5. results that say another cuDNN or NVRTC measured them are retuned, and only those;
#  6. ragged and paged (serving) shapes are tuned under their serving keys and resume.
bin=$1 sql=$2
here=$(dirname "$0")
config=$here/data/tune-small.yaml
dir=$(mktemp -d /tmp/attntune-tune-test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
if ! "$bin" devices >/dev/null 2>&1; then echo "no GPU: skipped"; exit 77; fi
fail() { echo "FAIL: $*"; exit 1; }

# 1. Plant a crash in every bm64 variant: an illegal address in the worker.
ATTNTUNE_FAULT=crash:.bm64. "$bin" tune "$config" --db "$dir/crash.db" >"$dir/crash.out" 2>"$dir/crash.err" ||
  { cat "$dir/crash.err"; fail "tune with a planted crash exited $?"; }
"$bin" cache export --trials --format csv --db "$dir/crash.db" >"$dir/crash.csv" || fail "export"
crashed=$(grep -c ',crashed,' "$dir/crash.csv")
ok=$(grep -c ',ok,' "$dir/crash.csv")
echo "planted crash: $crashed crashed trials, $ok ok trials"
[ "$crashed" -gt 0 ] || fail "no crashed trial recorded"
grep ',crashed,' "$dir/crash.csv" | grep -v '\.bm64\.' && fail "a trial crashed that was not planted"
[ "$ok" -gt 0 ] || fail "no candidate passed"
"$bin" cache list --db "$dir/crash.db" >"$dir/crash.list" || fail "cache list"
shapes=$(grep -c '^NVIDIA' "$dir/crash.list")
echo "best rows: $shapes"
[ "$shapes" -eq 16 ] || fail "expected a best for each of the 16 shapes, got $shapes"
grep 'bm64' "$dir/crash.list" && fail "a crashed variant became best"

# 1b. A hanging candidate ends as timeout (watchdog), one with NaN output as wrong.
one=$here/data/tune-one.yaml
ATTNTUNE_FAULT=hang:.bn32. "$bin" tune "$one" --db "$dir/hang.db" --watchdog 3 >/dev/null 2>"$dir/hang.err" ||
  { cat "$dir/hang.err"; fail "tune with a planted hang exited $?"; }
"$bin" cache export --trials --format csv --db "$dir/hang.db" >"$dir/hang.csv" || fail "export"
echo "planted hang: $(grep -c ',timeout,' "$dir/hang.csv") timeout trials"
[ "$(grep -c ',timeout,' "$dir/hang.csv")" -gt 0 ] || fail "no timeout recorded"
ATTNTUNE_FAULT=nan:.bn32. "$bin" tune "$one" --db "$dir/nan.db" >/dev/null 2>"$dir/nan.err" ||
  { cat "$dir/nan.err"; fail "tune with a planted NaN exited $?"; }
"$bin" cache export --trials --format csv --db "$dir/nan.db" >"$dir/nan.csv" || fail "export"
echo "planted NaN: $(grep -c ',wrong,' "$dir/nan.csv") wrong trials"
[ "$(grep -c ',wrong,' "$dir/nan.csv")" -gt 0 ] || fail "no wrong trial recorded"
grep ',wrong,' "$dir/nan.csv" | grep -v '\.bn32\.' && fail "a trial was wrong that was not planted"

# 2. kill -9 mid-run, then resume.
"$bin" tune "$config" --db "$dir/kill.db" >"$dir/kill1.out" 2>"$dir/kill1.err" &
pid=$!
n=0
for i in $(seq 1 600); do
  sleep 0.1
  n=$("$bin" cache export --trials --format csv --db "$dir/kill.db" 2>/dev/null | grep -c ',ok,')
  [ "$n" -ge 8 ] && break
done
kill -9 $pid
wait $pid 2>/dev/null
pkill -9 -f "attntune __worker" 2>/dev/null
"$bin" cache export --trials --format csv --db "$dir/kill.db" | sort >"$dir/before.csv"
before=$(($(wc -l <"$dir/before.csv") - 1))
echo "killed after $before committed trials"
[ "$before" -gt 0 ] || fail "nothing committed before the kill"
"$bin" tune "$config" --db "$dir/kill.db" >"$dir/kill2.out" 2>"$dir/kill2.err" || fail "rerun exited $?"
"$bin" cache export --trials --format csv --db "$dir/kill.db" | sort >"$dir/after.csv"
after=$(($(wc -l <"$dir/after.csv") - 1))
echo "after the rerun: $after trials"
# Nothing lost: every finished trial from before is still there, unchanged (the rows of
# first-pass results may be updated by the second pass, so compare only final rows).
grep -v '^gpu,' "$dir/before.csv" | awk -F, '$13 != "ok" || $19 >= 10' >"$dir/final-before.csv"
missing=$(comm -23 "$dir/final-before.csv" "$dir/after.csv" | wc -l)
[ "$missing" -eq 0 ] || { comm -23 "$dir/final-before.csv" "$dir/after.csv"; fail "$missing final trials changed or lost"; }
# Nothing redone: the rerun's log shows no trial for a (shape, impl) that was final before.
redone=0
while IFS=, read -r gpu shape rest; do
  impl=$(echo "$rest" | cut -d, -f10)
  if grep -q "$shape: $impl " "$dir/kill2.err"; then redone=$((redone + 1)); echo "redone: $shape $impl"; fi
done <"$dir/final-before.csv"
[ "$redone" -eq 0 ] || fail "$redone final trials were redone"
"$bin" cache list --db "$dir/kill.db" >"$dir/kill.list" || fail "cache list after resume"
[ "$(grep -c '^NVIDIA' "$dir/kill.list")" -eq 16 ] || fail "resume did not finish all 16 shapes"
# A third run has nothing to do.
"$bin" tune "$config" --db "$dir/kill.db" 2>"$dir/kill3.err" >/dev/null || fail "third run"
[ "$(grep -c 'skipped' "$dir/kill3.err")" -eq 16 ] || fail "third run redid work"
# 3. Ctrl-C: the trial in flight finishes, everything is committed, exit 130; a rerun completes.
"$bin" tune "$config" --db "$dir/int.db" >"$dir/int1.out" 2>"$dir/int1.err" &
pid=$!
for i in $(seq 1 600); do
  sleep 0.1
  n=$("$bin" cache export --trials --format csv --db "$dir/int.db" 2>/dev/null | grep -c ',ok,')
  [ "$n" -ge 4 ] && break
done
kill -INT $pid
wait $pid
code=$?
[ "$code" -eq 130 ] || fail "Ctrl-C: exit $code, expected 130"
grep -q "interrupted" "$dir/int1.err" || fail "Ctrl-C: no 'interrupted' message"
pgrep -f "attntune __worker" >/dev/null && fail "Ctrl-C left a worker running"
"$bin" tune "$config" --db "$dir/int.db" >/dev/null 2>"$dir/int2.err" || fail "rerun after Ctrl-C"
[ "$("$bin" cache list --db "$dir/int.db" | grep -c '^NVIDIA')" -eq 16 ] || fail "rerun after Ctrl-C did not finish"
echo "ok: Ctrl-C exited 130 after the trial in flight, and a rerun finished"
# 3b. SIGTERM to the whole process group, as `timeout` sends it: the worker dies with the run,
# and the trial it had in flight is not stored as crashed or timed out (it is no candidate's fault).
setsid "$bin" tune "$config" --db "$dir/term.db" >"$dir/term1.out" 2>"$dir/term1.err" &
pid=$!
for i in $(seq 1 600); do
  sleep 0.1
  n=$("$bin" cache export --trials --format csv --db "$dir/term.db" 2>/dev/null | grep -c ',ok,')
  [ "$n" -ge 4 ] && break
done
kill -TERM -"$pid" # dash: a negative pid after the signal is the process group
wait $pid
"$bin" cache export --trials --format csv --db "$dir/term.db" >"$dir/term.csv" || fail "export after SIGTERM"
grep -qE ',(crashed|timeout),' "$dir/term.csv" && fail "SIGTERM: the trial in flight was stored as crashed or timeout"
"$bin" tune "$config" --db "$dir/term.db" >/dev/null 2>"$dir/term2.err" || fail "rerun after SIGTERM"
[ "$("$bin" cache list --db "$dir/term.db" | grep -c '^NVIDIA')" -eq 16 ] || fail "rerun after SIGTERM did not finish"
echo "ok: SIGTERM to the process group stored no crashed trial, and a rerun finished"

# 4. FP8: cuDNN's FP8 graph is the shape's baseline (a timed "cudnn" trial where cuDNN runs FP8,
# Hopper and newer; else a trial that says why not), never its best (it writes FP8 output, plans
# for FP8 inputs write bf16), and the report's note says which it was.
fp8=$here/data/tune-fp8.yaml
"$bin" tune "$fp8" --db "$dir/fp8.db" >"$dir/fp8.out" 2>"$dir/fp8.err" || { cat "$dir/fp8.err"; fail "FP8 tune exited $?"; }
"$bin" cache export --trials --format csv --db "$dir/fp8.db" >"$dir/fp8.csv" || fail "FP8 export"
"$bin" report --db "$dir/fp8.db" --format csv >"$dir/fp8-report.csv" || fail "FP8 report"
cudnn=$(grep ',e4m3,none,0,cudnn,' "$dir/fp8.csv")
[ -n "$cudnn" ] || fail "FP8: no cuDNN trial"
if echo "$cudnn" | grep -q ',cudnn,ok,'; then
  grep -q 'cuDNN writes FP8 output (e4m3); attntune writes bf16' "$dir/fp8-report.csv" ||
    fail "FP8: cuDNN timed, but the report has no note that it writes FP8 output"
  echo "FP8: cuDNN baseline $(echo "$cudnn" | cut -d, -f14) ms, err vs naive $(echo "$cudnn" | cut -d, -f16)"
else
  grep -q '"*cuDNN: ' "$dir/fp8-report.csv" || fail "FP8: cuDNN has no time and the report does not say why"
  echo "FP8: cuDNN has no FP8 time here: $(grep -o '"*cuDNN: [^"]*' "$dir/fp8-report.csv" | head -1)"
fi
if grep -v ',cudnn,' "$dir/fp8.csv" | grep -q ',ok,'; then
  # the report's csv: ...,dtype,mask,lse,best_impl,...
  grep -q ',e4m3,none,0,cudnn,' "$dir/fp8-report.csv" && fail "FP8: cuDNN was stored as the best"
  grep -q ',e4m3,none,0,fa[23]\.e4m3\.' "$dir/fp8-report.csv" || fail "FP8: no generated kernel is the best"
  echo "ok: FP8 best is a generated kernel, cuDNN's FP8 graph the baseline"
else
  echo "FP8: no generated FP8 kernel passed on this GPU (FP8 needs sm_89 or newer); best not checked"
fi

# 5. Stale rows. The rows of a finished run are rewritten to say that another cuDNN timed the
# cuDNN baseline (and that the best row compared with it); `cache list` calls them stale, a rerun
# retunes the shape (the cuDNN trial again, the kernels' trials reused) and a third run skips it.
"$bin" tune "$one" --db "$dir/stale.db" >/dev/null 2>"$dir/stale1.err" || { cat "$dir/stale1.err"; fail "stale: first run"; }
if "$bin" devices 2>/dev/null | grep -q '^cuDNN  *[0-9]'; then
  "$sql" "$dir/stale.db" "UPDATE best SET cudnn = '9.0.0'; UPDATE trials SET cudnn = '9.0.0' WHERE impl = 'cudnn'" ||
    fail "stale: rewriting the cuDNN version"
  "$bin" cache list --db "$dir/stale.db" | grep -q "stale: .*cuDNN 9.0.0, this process has cuDNN" ||
    { "$bin" cache list --db "$dir/stale.db"; fail "stale: cache list does not call the row stale"; }
  "$bin" tune "$one" --db "$dir/stale.db" >"$dir/stale2.out" 2>"$dir/stale2.err" || fail "stale: rerun"
  grep -q "done earlier, but stale (.*cuDNN 9.0.0" "$dir/stale2.err" || { cat "$dir/stale2.err"; fail "stale: rerun did not retune"; }
  grep -q " 0 compiled" "$dir/stale2.out" || { cat "$dir/stale2.out"; fail "stale: a cuDNN change recompiled kernels"; }
  "$bin" cache list --db "$dir/stale.db" | grep -q "stale" && fail "stale: still stale after the retune"
  "$bin" tune "$one" --db "$dir/stale.db" >/dev/null 2>"$dir/stale3.err" || fail "stale: third run"
  grep -q "done earlier, skipped" "$dir/stale3.err" || { cat "$dir/stale3.err"; fail "stale: third run retuned"; }
  echo "ok: a row of another cuDNN was called stale, retuned once, and current after"
else
  echo "no cuDNN here: the cuDNN part of 5 is skipped"
fi
# Another NVRTC: the kernels' trials and the best row; the kernels are compiled and timed again.
"$sql" "$dir/stale.db" "UPDATE best SET nvrtc = '1.0'; UPDATE trials SET nvrtc = '1.0' WHERE impl <> 'cudnn'" ||
  fail "stale: rewriting the NVRTC version"
"$bin" tune "$one" --db "$dir/stale.db" >"$dir/stale4.out" 2>"$dir/stale4.err" || fail "stale: NVRTC rerun"
grep -q "done earlier, but stale (best .*compiled with NVRTC 1.0" "$dir/stale4.err" ||
  { cat "$dir/stale4.err"; fail "stale: another NVRTC did not retune"; }
grep -q " 0 compiled" "$dir/stale4.out" && { cat "$dir/stale4.out"; fail "stale: another NVRTC recompiled nothing"; }
"$bin" cache list --db "$dir/stale.db" | grep -q "stale" && fail "stale: still stale after the NVRTC retune"
echo "ok: rows of another NVRTC were recompiled and retimed"
# 6. Serving shapes: a ragged prefill batch of 3 sequences and a paged decode batch (page size 16)
# are tuned under their serving keys; a rerun skips them (resumable like padded shapes).
serving=$here/data/tune-serving.yaml
"$bin" tune "$serving" --db "$dir/serving.db" >"$dir/serving.out" 2>"$dir/serving.err" ||
  { cat "$dir/serving.err"; fail "tune of serving shapes exited $?"; }
"$bin" cache export --trials --format csv --db "$dir/serving.db" >"$dir/serving.csv" || fail "export serving"
grep -q '\.qragged\.kvragged\.lq128\.lkv128,.*,ok,' "$dir/serving.csv" || { cat "$dir/serving.csv"; fail "no ok ragged trial"; }
grep -q '\.kvpaged16\.lkv128,.*decode\.bf16\.pg16\..*,ok,' "$dir/serving.csv" ||
  { cat "$dir/serving.csv"; fail "no ok paged decode trial"; }
# cuDNN's paged graph (9.6 and later) runs this shape: its trial is timed and verified (ok), or,
# where the loaded cuDNN refuses it, recorded as unsupported; never missing, failed or wrong.
grep '\.kvpaged16\.' "$dir/serving.csv" | grep -Eq ',cudnn,(ok|unsupported),' ||
  { grep '\.kvpaged16\.' "$dir/serving.csv"; fail "paged: no cuDNN trial (ok or unsupported) recorded"; }
"$bin" report --db "$dir/serving.db" >"$dir/serving.report" || fail "report of serving rows"
grep -q 'qragged.kvragged' "$dir/serving.report" && grep -q 'kvpaged16' "$dir/serving.report" ||
  { cat "$dir/serving.report"; fail "report lacks the serving rows"; }
"$bin" tune "$serving" --db "$dir/serving.db" >/dev/null 2>"$dir/serving2.err" || fail "serving rerun"
[ "$(grep -c 'done earlier, skipped' "$dir/serving2.err")" -eq 2 ] || { cat "$dir/serving2.err"; fail "serving rerun redid work"; }
echo "ok: ragged and paged shapes tuned under their serving keys, reported, and skipped on rerun"
echo "ok: crash recorded and run completed; kill -9 + rerun lost nothing and redid nothing"
cat "$dir/kill2.out"
