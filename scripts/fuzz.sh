#!/bin/sh
# fuzz.sh TARGET|all SECONDS — build the libFuzzer targets of tests/fuzz (clang, ASan and UBSan,
# in build-fuzz/ or $FUZZ_BUILD) and run each for SECONDS, starting from its seeds in
# tests/fuzz/corpus/TARGET/ (read only) plus what earlier runs found in build-fuzz/corpus/TARGET/.
# Prints each target's exec count and findings (crash-, leak-, timeout-, oom- files, kept in
# build-fuzz/findings/TARGET/ with the log); exits 1 when there is a finding.
# Targets: config (tn_config_parse), variant (gen_variant_parse), shape (at_shape_check and keys),
# cache (cache_open read-only on hostile SQLite files), serving (at_serving_check_host, at_serving_key
# and at_lengths_parse on hostile metadata). Reproduce a finding with
#     build-fuzz/tests/fuzz/fuzz_TARGET FILE
set -eu
cd "$(dirname "$0")/.."
ALL="config variant shape cache serving"
if [ $# -ne 2 ] || ! [ "$2" -gt 0 ] 2>/dev/null; then
  echo "usage: scripts/fuzz.sh TARGET|all SECONDS (targets: $ALL)" >&2
  exit 2
fi
case "$1" in
  all) targets=$ALL ;;
  config|variant|shape|cache|serving) targets=$1 ;;
  *) echo "fuzz.sh: unknown target '$1' (expected one of: $ALL, all)" >&2; exit 2 ;;
esac
seconds=$2
build=${FUZZ_BUILD:-build-fuzz}
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (Debian: apt-get install clang libclang-rt-dev)" >&2; exit 2; }
CC=clang cmake -S . -B "$build" -DATTNTUNE_FUZZ=ON -DATTNTUNE_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
for t in $targets; do set -- "$@" "fuzz_$t"; done
shift 2
cmake --build "$build" -j"$(nproc)" --target "$@" >/dev/null

status=0
for t in $targets; do
  corpus=$build/corpus/$t findings=$build/findings/$t
  mkdir -p "$corpus" "$findings"
  log=$findings/run.log
  # -timeout: an input that runs 10 s is a finding; -rss_limit_mb: so is one that needs 2 GiB.
  # ASan's leak check runs on every input (libFuzzer's -detect_leaks, on by default).
  dict=
  [ -f "tests/fuzz/$t.dict" ] && dict=-dict=tests/fuzz/$t.dict
  set +e
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 $dict \
    -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  found=$(find "$findings" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
            -o -name 'oom-*' -o -name 'slow-unit-*' \) | wc -l)
  line="fuzz $t: ${execs:-?} execs in ${seconds}s, corpus $(ls "$corpus" | wc -l) files, $found finding(s), exit $rc"
  echo "$line"
  if [ "$found" -gt 0 ] || [ $rc -ne 0 ]; then
    status=1
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | head -n 5 | sed 's/^/  /'
    find "$findings" -maxdepth 1 -type f ! -name run.log | sed 's/^/  finding: /'
    echo "  log: $log"
  fi
done
exit $status
