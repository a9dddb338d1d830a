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
# on_gpu LABEL CHECK -- ARGS...: a command that gets past the flag checks to the GPU exits 0 with
# one, where CHECK (a function reading $out) must pass, and 1 without one, saying so.
on_gpu() {
  label=$1 check=$2
  shift 3
  out=$("$bin" "$@" 2>&1)
  got=$?
  if [ $got = 0 ]; then
    $check || { echo "FAIL: $label printed:"; echo "$out"; fails=$((fails + 1)); }
  elif [ $got = 1 ]; then
    printf '%s' "$out" | grep -qi "no CUDA GPU\|cannot load the CUDA driver" ||
      { echo "FAIL: $label without GPU said: $out"; fails=$((fails + 1)); }
  else
    echo "FAIL: $label exited $got: $out"; fails=$((fails + 1))
  fi
  echo "ok: attntune $label -> $got"
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
expect 2 "fa3 runs head dim 64, 128 or 256 (warp-specialized also 96 and 192), not 96" -- gen --emit fa3.bf16.d96.none.g1.bm128.bn128.w8.s2
expect 0 "cp.async.bulk.tensor.4d" -- gen --emit fa3.bf16.d96.none.g1.bm128.bn128.w8.s2.ws
expect 2 "family fa2 has no warp-specialized variants" -- gen --emit fa2.bf16.d128.none.g1.bm128.bn64.w4.s2.ws
expect 0 "fa3_transpose_v<FA3_TRANSPOSERS>" -- gen --emit fa3.e4m3.d128.none.g1.bm128.bn128.w8.s2.ws.obf16
expect 2 "with e4m3 inputs runs head dim 128 or 256, or 64 with V^T ahead (.vt), not 64 without .vt" -- gen --emit fa3.e4m3.d64.none.g1.bm128.bn128.w8.s2.ws.obf16
# The persistent form (.pers) of warp-specialized causal fa3; refused without a mask or a .ws.
expect 0 "#define FA3_PERSISTENT 1" -- gen --emit fa3.bf16.d128.causal-br.g4.bm128.bn128.w8.s2.wspp.pers.lse
expect 2 "persistent fa3 runs causal masks (causal, causal-br), not none" -- gen --emit fa3.bf16.d128.none.g1.bm128.bn176.w8.s2.ws.pers
expect 2 ".pers is a form of the warp-specialized kernel and needs .ws or .wspp" -- gen --emit fa3.bf16.d128.causal.g1.bm128.bn128.w8.s2.pers
expect 0 "decode family" -- gen --help
# gen --default: the untuned call's key, whose tail split depends on the batch (B2 N16 8k splits
# its last wave, B4 N8 2k has none to split); the decode family for one token.
expect 0 "^fa3.e4m3.d64.none.g1.bm192.bn128.w12.s2.ws.vt.tw132.obf16$" -- gen --head-dim 64 --dtype e4m3 --seq-len 8192 --default
expect 0 "^fa3.e4m3.d64.none.g1.bm192.bn128.w12.s2.ws.vt.obf16$" -- gen --head-dim 64 --dtype e4m3 --seq-len 2048 --batch 4 --q-heads 8 --default
expect 0 "^decode.bf16.d128.none.g4.bm1." -- gen --head-dim 128 --q-len 1 --kv-len 4096 --q-heads 32 --kv-heads 8 --batch 1 --default
expect 2 "--list conflicts with an earlier action (one of --list, --default, --emit, --compile)" -- gen --head-dim 128 --default --list
expect 2 "invalid value '0' for --batch" -- gen --head-dim 128 --batch 0 --default
# An FP8 KV cache (--kv-dtype): decode variants with .kv<dtype> for T <= 16, a reason otherwise.
first=$("$bin" gen --head-dim 128 --q-heads 32 --kv-heads 8 --q-len 1 --kv-len 16384 --kv-dtype e4m3 --list 2>&1 | head -n 1)
case $first in decode.bf16.kve4m3.d128.none.g4.bm1.*) echo "ok: gen --kv-dtype e4m3 --list starts with $first" ;;
  *) echo "FAIL: gen --kv-dtype e4m3 --list starts with '$first', expected a decode.bf16.kve4m3 key"; fails=$((fails + 1)) ;; esac
expect 2 "no generated variant reads e5m2 K/V with f16 Q for T = 1024: an FP8 KV cache runs on the decode family only" -- gen --head-dim 128 --seq-len 1024 --dtype f16 --kv-dtype e5m2 --list
expect 2 "unknown dtype 'f32' for --kv-dtype" -- gen --head-dim 128 --kv-dtype f32 --list
expect 2 "kv_dtype bf16 with dtype f16: K and V may differ from Q only as FP8" -- bench --dtype f16 --kv-dtype bf16 --q-len 1
expect 0 "#define DEC_KV_DTYPE 4 /\* e5m2 \*/" -- gen --emit decode.f16.kve5m2.d64.causal-br.g7.bm16.bn64.w8.s2.sp3.lse
expect 0 "--kv-dtype T       K and V: e4m3 or e5m2" -- bench --help
# bench --impl: the list is checked before a GPU is opened, so these need none.
expect 0 "decode         the same, the split-KV decode family only" -- bench --help
expect 0 "KV TB/s = 2\*B\*Nkv\*S\*D\*sizeof(K/V dtype) / time" -- bench --help
expect 2 "the decode family runs queries of 1 to 16 tokens, not T = 1024" -- bench --impl decode
expect 2 "the decode family runs queries of 1 to 16 tokens, not T = 17" -- bench --impl naive,decode --q-len 17 --kv-len 4096
expect 2 "runs queries of 1 to 16 tokens, not T = 64" -- bench --impl decode.bf16.d128.none.g1.bm16.bn64.w4.s4.sp4 --seq-len 64
expect 2 "needs .sp<splits> after the stages" -- bench --impl decode.bf16.d128.none.g4.bm1.bn64.w4.s4 --q-len 1
expect 2 "unknown implementation 'decoder' in --impl" -- bench --impl decoder --q-len 1
# A decode shape gets past the checks to the GPU: a KV TB/s column and the fastest variant's row.
decode_rows() { printf '%s' "$out" | grep -q "KV TB/s" && printf '%s' "$out" | grep -q "fastest decode variant"; }
on_gpu "bench --impl decode (decode shape)" decode_rows -- \
  bench --impl decode --q-len 4 --kv-len 4096 --q-heads 32 --kv-heads 8 --causal-br --reps 3
# bench --rounds: checked before a GPU is opened; with one, the medians' table after the rounds,
# each implementation with as many readings as rounds, the list backward in the second.
expect 0 "--rounds N         time the --impl list N times" -- bench --help
expect 2 "invalid value '0' for --rounds (expected an integer from 1 to 100)" -- bench --rounds 0
expect 2 "invalid value '101' for --rounds" -- bench --rounds 101
expect 2 "--rounds times one shape's --impl list; not with --lengths" -- bench --rounds 2 --lengths 5,6
expect 2 "--rounds times one shape's --impl list; not with --overhead" -- bench --rounds 2 --overhead
round_medians() {
  printf '%s' "$out" | grep -q "^median of 3 rounds" &&
    printf '%s' "$out" | grep -q "^round 2 of 3 (backward)" &&
    [ "$(printf '%s\n' "$out" | awk '/^median of/ { on = 1; next } on && $NF == 3' | wc -l)" = 2 ] &&
    printf '%s' "$out" | grep -q "^\* fastest median: "
}
on_gpu "bench --rounds 3 (a medians' table of two implementations with 3 readings each)" round_medians -- \
  bench --impl naive,default --rounds 3 --batch 1 --seq-len 256 --q-heads 4 --head-dim 64 --reps 5

# bench --lengths / --page-size (serving layouts): flags checked before a GPU is opened.
expect 0 "--lengths SPEC     a ragged batch" -- bench --help
expect 0 "--impl cudnn       with a ragged batch: cuDNN's ragged (varlen) graph" -- bench --help
expect 2 "--page-size 8 not allowed (expected 1, 16, 32, 64, 128, 256)" -- bench --lengths 512,0,1 --page-size 8
expect 2 "length 'x' in lengths is not a length" -- bench --lengths 1,x
expect 2 "length range 9..3 invalid" -- bench --lengths uniform:9:3
expect 2 "either by --lengths or by --kv-len/--seq-len, not both" -- bench --lengths 5,6 --kv-len 9
expect 2 "--overhead measures padded plans" -- bench --lengths 5,6 --overhead
expect 2 "unknown implementation 'bogus' in --impl" -- bench --lengths 5,6 --impl naive,bogus
expect 2 "at most 4096 sequences" -- bench --page-size 16 --batch 5000
naive_row_cudnn_refused() { printf '%s' "$out" | grep -q "^naive " && printf '%s' "$out" | grep -q "^cudnn .*unsupported"; }
on_gpu "bench --lengths --page-size (a naive row, cuDNN refused)" naive_row_cudnn_refused -- \
  bench --lengths uniform:16:64:3 --batch 4 --page-size 16 --q-heads 8 --kv-heads 2 --head-dim 64 --causal --reps 3
# A config with a ragged or paged shape: tune lists its serving variants under its serving key (no
# GPU needed); bench --suite refuses it by that key.
serving_cfg=$(mktemp); printf 'shapes:\n  - {name: pd, lengths: [100, 0, 1, 4096], q_len: 1, page_size: 16, q_heads: 32, kv_heads: 8, head_dim: 128}\n' > "$serving_cfg"
expect 0 "b4.t1.s4096.hq32.hkv8.d128.bf16.none.kvpaged16.lkv2048  *pd  *[1-9][0-9]* (decode [1-9]" -- tune --dry-run "$serving_cfg"
expect 2 "shape b4.t1.s4096.hq32.hkv8.d128.bf16.none.kvpaged16.lkv2048 (pd) has padded Q with paged K/V (page size 16): ragged and paged shapes are not benchmarked from a config" -- bench --suite "$serving_cfg"
rm -f "$serving_cfg"
# Sizes: the largest accepted T and S (2^30) list the same space as T = S = 2^20 (no tile is
# pruned at either), without int overflow in the pruning; larger tensors are refused up front.
for lens in "--seq-len" "--q-len 1 --kv-len"; do
  big=$("$bin" gen --head-dim 128 $lens 1073741824 --list 2>&1); ref=$("$bin" gen --head-dim 128 $lens 1048576 --list 2>&1)
  if [ -n "$ref" ] && [ "$big" = "$ref" ]; then echo "ok: gen $lens 2^30 lists the space of 2^20"
  else echo "FAIL: gen $lens 2^30 listed:"; echo "$big"; echo "expected:"; echo "$ref"; fails=$((fails + 1)); fi
done
expect 2 "batch 1073741824 x q_len 1073741824 x q_heads 16 x head_dim 128" -- bench --batch 1073741824 --seq-len 1073741824
expect 2 "invalid value '1073741825' for --kv-len (expected an integer from 1 to 1073741824)" -- bench --impl naive --q-len 1 --kv-len 1073741825
# tune --dry-run: the config expanded and checked, candidates per shape, no driver needed.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
quick=$(dirname "$0")/../configs/quick.yaml
expect 0 "9 shapes" -- tune "$quick" --dry-run
expect 0 "b2.t1024.s1024.hq16.hkv16.d64.bf16.none  *quick  *8 (fa3 8)  *12.0 MiB" -- tune "$quick" --dry-run
expect 0 "total: 9 shapes, 72 candidates, 427819008 bytes of Q, K and V (408.0 MiB)" -- tune "$quick" --dry-run
expect 0 "^[0-9][0-9]* distinct variant keys: at most this many NVRTC runs" -- tune "$quick" --dry-run
expect 0 "quick-gqa  *4 (fa2 4) " -- tune "$quick" --dry-run --arch sm_80
expect 2 "--arch: architecture 'sm_12' is too old" -- tune "$quick" --dry-run --arch sm_12
expect 2 "--arch applies to --dry-run only" -- tune "$quick" --arch sm_80
printf 'shapes:\n  - {batch: 2147483647, seq_len: 2147483647, q_heads: 1, head_dim: 64}\n' > "$tmp/huge.yaml"
expect 2 "shapes\[0\].seq_len: seq_len 2147483647 out of range (expected 1..1073741824" -- tune "$tmp/huge.yaml" --dry-run
expect 2 "shapes\[0\].seq_len: seq_len 2147483647 out of range" -- tune "$tmp/huge.yaml"
printf 'shapes:\n  - {batch: 1073741824, seq_len: 1073741824, q_heads: 16, head_dim: 128}\n' > "$tmp/big.yaml"
expect 2 "shapes\[0\]: batch 1073741824 x q_len 1073741824 x q_heads 16 x head_dim 128" -- tune "$tmp/big.yaml" --dry-run
# Argument errors come before the driver is loaded: 2 on a machine without one too.
expect 2 "GPU 0 is listed twice in --devices" -- tune "$quick" --devices 0,0
expect 2 "empty file name for --db" -- tune "$quick" --db=
expect 2 "'$tmp' for --db is a directory" -- tune "$quick" --db "$tmp"
expect 2 "empty file name for --db" -- bench --suite "$quick" --db=
expect 2 "'$tmp' for --db is a directory" -- bench --suite "$quick" --db "$tmp"
expect 2 "GPU 1 is listed twice in --devices" -- bench --suite "$quick" --devices 1,1
expect 2 "unknown implementation 'nosuch' in --impl" -- bench --impl nosuch
# Messages: 0 is out of range, --flag=value everywhere, -h like --help, the families named.
expect 2 "invalid value '0' for --head-dim (expected an integer from 1 to 512)" -- gen --head-dim 0 --list
expect 0 "^fa3.bf16.d64" -- gen --head-dim=64 --seq-len=4096 --list
expect 2 "--head-dim is required" -- gen --list
expect 0 "wgmma.mma_async" -- gen --emit=fa3.bf16.d128.none.g1.bm128.bn128.w8.s2
expect 2 "unknown option '--frob'" -- gen --head-dim 64 --list --frob
expect 2 "unexpected argument 'extra'" -- gen --head-dim 64 --list extra
expect 2 "option '--emit' needs a value" -- gen --emit
expect 2 "empty file name for --db" -- report --db=
expect 2 "'$tmp' for --db is a directory" -- report --db "$tmp"
# A directory or nothing as the cache is a usage error naming it, for every cache action that
# reads --db (SQLite alone said "disk I/O error"); migrate is listed.
for action in list "show b2.t1.s1.hq1.hkv1.d64.bf16.none" "export --format csv" prune migrate; do
  expect 2 "'$tmp' for --db is a directory (give a file, e.g. --db $tmp/attntune.db)" -- cache $action --db "$tmp"
  expect 2 "empty file name for --db" -- cache $action --db=
done
expect 0 "migrate upgrade a cache written by an older attntune" -- cache --help
expect 1 "cache file '$tmp/none.db' does not exist" -- cache migrate --db "$tmp/none.db"
expect 2 "unknown action 'frob' (expected list, show, export, merge, prune, migrate)" -- cache frob
for cmd in devices gen bench tune report cache; do expect 0 "usage: attntune $cmd" -- $cmd -h; done
expect 0 "fa2, fa3 and decode" -- tune --help
if "$bin" --help | grep -q "fa2 variants" || "$bin" tune --help | grep -q "fa2 variants"; then
  echo "FAIL: help still says 'fa2 variants'"; fails=$((fails + 1))
else
  echo "ok: help names the families"
fi
# devices: 0 with a GPU, 1 with a plain message without one.
lists_devices() { printf '%s' "$out" | grep -q "compute capability"; }
on_gpu devices lists_devices -- devices
exit $fails
