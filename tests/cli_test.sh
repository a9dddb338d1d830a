#!/bin/sh
# cli_test.sh ATTNTUNE — exit codes and messages of the command line (no GPU needed).
bin=$1
fails=0
expect() { # expect CODE PATTERN -- ARGS...
  code=$1 pattern=$2
  shift 3
  out=$("$bin" "$@" 2>&1)
  got=$?
  if [ "$got" != "$code" ]; then
    echo "FAIL: attntune $* exited $got, expected $code"; echo "$out"; fails=$((fails + 1))
  elif ! printf '%s' "$out" | grep -q -- "$pattern"; then
    echo "FAIL: attntune $* printed no '$pattern':"; echo "$out"; fails=$((fails + 1))
  else
    echo "ok: attntune $* -> $got"
  fi
}
expect 0 "usage: attntune" -- --help
expect 0 "devices" -- --help
expect 0 "attntune 0\." -- --version
expect 2 "usage: attntune" --
expect 2 "unknown command 'frobnicate'" -- frobnicate
expect 2 "unknown option '--frob'" -- --frob
expect 0 "usage: attntune devices" -- devices --help
expect 2 "unknown option '--bogus'" -- devices --bogus
expect 2 "unexpected argument 'extra'" -- devices extra
# devices: 0 with a GPU, 1 with a plain message without one.
out=$("$bin" devices 2>&1); got=$?
if [ $got = 0 ]; then
  printf '%s' "$out" | grep -q "compute capability" || { echo "FAIL: devices output"; fails=$((fails + 1)); }
elif [ $got = 1 ]; then
  printf '%s' "$out" | grep -qi "no CUDA GPU\|cannot load the CUDA driver" ||
    { echo "FAIL: devices without GPU said: $out"; fails=$((fails + 1)); }
else
  echo "FAIL: devices exited $got"; fails=$((fails + 1))
fi
echo "ok: attntune devices -> $got"
exit $fails
