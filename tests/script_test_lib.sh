# script_test_lib.sh — sourced by the tests of scripts/*_bench.sh (". "$(dirname "$0")/script_test_lib.sh"):
# a scratch folder $dir, removed at exit, and the checks. Each check prints "ok: ..." or
# "FAIL: ..." and counts the failures in $fails; finish exits 1 when there were any.
fails=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
expect() { # expect DESCRIPTION PATTERN TEXT: some line of TEXT matches the extended regex PATTERN
  if printf '%s\n' "$3" | grep -Eq -- "$2"; then echo "ok: $1"; else
    echo "FAIL: $1: no line matches '$2' in:"; printf '%s\n' "$3"; fails=$((fails + 1)); fi
}
count() { # count DESCRIPTION PATTERN TEXT N: exactly N lines of TEXT match PATTERN
  n=$(printf '%s\n' "$3" | grep -cE -- "$2")
  [ "$n" = "$4" ] && echo "ok: $1" || { echo "FAIL: $1: $n lines, expected $4"; fails=$((fails + 1)); }
}
same() { # same DESCRIPTION GOT WANT: a value (an exit code, a count) as expected
  [ "$2" = "$3" ] && echo "ok: $1" || { echo "FAIL: $1: got '$2', expected '$3'"; fails=$((fails + 1)); }
}
finish() { [ "$fails" = 0 ] || { echo "$fails failed"; exit 1; }; }
