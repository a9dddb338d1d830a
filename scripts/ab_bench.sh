#!/bin/sh
# ab_bench.sh BIN_A BIN_B [bench flags...] — the A/B of docs/perf.md ("change one thing, measure")
# in one go, on the GPU machine: `BIN bench FLAGS` with binary A, then B, ROUNDS times (default 3),
# so that both see the same clocks as nearly as two runs can; then a table of every row's rate
# (TFLOP/s, or TB/s of K/V for decode shapes) per round and binary, and B's mean over A's. Rows
# are matched by their key (cuDNN's row, and each variant's), so name the variants in --impl
# rather than 'default' where the two binaries' defaults differ. A key one binary does not list
# reads '-'.
#   ROUNDS=2 sh scripts/ab_bench.sh base/attntune build/attntune --impl cudnn,KEY1,KEY2 \
#       --dtype e4m3 --head-dim 64 --batch 2 --seq-len 8192 --q-heads 16 --reps 30
# Full bench output goes to $OUT/ab_bench.txt (or ./gpu-logs), appended, so several calls (one per
# shape) keep theirs; the table is printed last. Exits 1 if any bench run failed.
if [ $# -lt 2 ]; then
  echo "usage: ab_bench.sh BIN_A BIN_B [attntune bench flags...]" >&2
  exit 2
fi
a=$1 b=$2
shift 2
for bin in "$a" "$b"; do
  [ -x "$bin" ] || { echo "ab_bench.sh: '$bin' is not an executable attntune" >&2; exit 2; }
done
out=${OUT:-gpu-logs}
rounds=${ROUNDS:-3}
mkdir -p "$out"
build=${BUILD:-build} # whose devlibs the binaries load on the GPU machine (../shared/GPU.md)
. "$(dirname "$0")/gpu_env.sh"
log="$out/ab_bench.txt"
runs="$out/.ab_runs.$$"
: >"$runs"
trap 'rm -f "$runs"' EXIT
rc=0
round=1
while [ "$round" -le "$rounds" ]; do
  for side in A B; do
    bin=$a
    [ "$side" = B ] && bin=$b
    echo "== round $round $side $bin bench $*" >>"$log"
    # Each run's rows go to $runs tagged with the round and side: "round side key rate".
    tmp="$runs.one"
    timeout "${AB_TIMEOUT:-300}" "$bin" bench "$@" >"$tmp" 2>&1 || { rc=1; echo "ab_bench.sh: round $round $side failed (see $log)" >&2; }
    cat "$tmp" >>"$log"
    [ -n "${device:-}" ] || device=$(grep -m1 '^device:' "$tmp" | cut -d, -f1)
    awk -v r="$round" -v s="$side" '
      /^impl / { rows = 1; next }
      rows && NF >= 3 && $1 != "*" && $3 + 0 > 0 { print r, s, $1, $3 }' "$tmp" >>"$runs"
    rm -f "$tmp"
  done
  round=$((round + 1))
done

echo "== A: $a"
echo "== B: $b"
echo "== bench $*"
[ -n "${device:-}" ] && echo "== $device (every rate from this one GPU, A and B alternately)"
awk -v rounds="$rounds" '
  !(($3) in seen) { seen[$3] = 1; order[n++] = $3 }
  { rate[$3, $1, $2] = $4; sum[$3, $2] += $4; cnt[$3, $2]++ }
  END {
    printf "%-56s", "impl"
    for (r = 1; r <= rounds; r++) printf " %8s %8s", "A" r, "B" r
    printf " %7s\n", "B/A"
    for (i = 0; i < n; i++) {
      k = order[i]
      printf "%-56s", k
      for (r = 1; r <= rounds; r++)
        printf " %8s %8s", ((k, r, "A") in rate ? rate[k, r, "A"] : "-"), ((k, r, "B") in rate ? rate[k, r, "B"] : "-")
      if (cnt[k, "A"] && cnt[k, "B"]) printf " %7.3f\n", (sum[k, "B"] / cnt[k, "B"]) / (sum[k, "A"] / cnt[k, "A"])
      else printf " %7s\n", "-"
    }
  }' "$runs"
exit $rc
