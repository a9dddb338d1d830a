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
# gen (NVRTC only, no GPU): fa3 is listed on sm_90a only, first; an fa3 key emits wgmma.
first=$("$bin" gen --head-dim 128 --seq-len 4096 --list 2>&1 | head -n 1)
case $first in fa3.bf16.d128.*) echo "ok: gen --list on sm_90a starts with $first" ;;
  *) echo "FAIL: gen --list on sm_90a starts with '$first', expected an fa3 key"; fails=$((fails + 1)) ;; esac
if "$bin" gen --head-dim 128 --arch sm_90 --list 2>&1 | grep -q '^fa3'; then
  echo "FAIL: gen --arch sm_90 lists fa3 (wgmma needs sm_90a)"; fails=$((fails + 1))
else
  echo "ok: gen --arch sm_90 lists no fa3"
fi
expect 0 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" -- gen --emit fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.obf16
expect 2 "fa3 runs head dim 64, 128 or 256, not 96" -- gen --emit fa3.bf16.d96.none.g1.bm128.bn128.w8.s2
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
