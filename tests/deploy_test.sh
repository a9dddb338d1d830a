#!/bin/sh
# deploy_test.sh ATTNTUNE SOURCE_DIR — deploy/tune-indexed-job.yaml against the CLI of this build,
# without a GPU: the pod command of every index, as the Job runs it (its env, the folded args), is
# run with `tune --dry-run` (`attntune devices` needs a GPU and is left out); each must exit 0,
# and the shards' shapes must be disjoint and together the config's, as deploy/README.md says.
# The Job's counts (completions, parallelism, SHARDS) must agree, and its CONFIG must be one
# that `cmake --install` puts in share/attntune/configs.
bin=$1 src=$2
job=$src/deploy/tune-indexed-job.yaml
dir=$(mktemp -d /tmp/attntune-deploy-test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ -f "$job" ] || fail "no $job"

field() { sed -n "s/^ *$1: *\([0-9][0-9]*\).*/\1/p" "$job" | head -n 1; }
env_value() { sed -n "/- name: $1\$/{n;s/^ *value: *\"\{0,1\}\([^\"]*\)\"\{0,1\}.*/\1/p;}" "$job" | head -n 1; }
completions=$(field completions) parallelism=$(field parallelism) shards=$(env_value SHARDS)
config=$(env_value CONFIG)
echo "completions $completions, parallelism $parallelism, SHARDS $shards, CONFIG $config"
[ -n "$shards" ] && [ "$completions" = "$shards" ] && [ "$parallelism" = "$shards" ] ||
  fail "completions ($completions), parallelism ($parallelism) and SHARDS ($shards) must be equal"
case "$config" in
  /usr/local/share/attntune/configs/*) ;;
  *) fail "CONFIG $config is not under the installed configs (/usr/local/share/attntune/configs)" ;;
esac
name=${config##*/}
[ -f "$src/configs/$name" ] || fail "CONFIG names $name, which configs/ does not have"

# The folded scalar after "- >-": its lines joined with spaces, as YAML folds them.
command=$(sed -n '/^ *- >-$/,/^ *[a-z]*:/p' "$job" | sed '1d;$d' | sed 's/^ *//' | tr '\n' ' ')
echo "pod command: $command"
case "$command" in *"attntune tune \"\$CONFIG\""*"--shard"*"--db"*) ;; *) fail "the pod command is not a tune run" ;; esac

# attntune, as the pod calls it: this build; `devices` (a GPU) skipped; tune as a dry run; the
# shared volume a temporary folder.
cat >"$dir/attntune" <<EOS
#!/bin/sh
[ "\$1" = devices ] && exit 0
exec "$bin" "\$@" --dry-run
EOS
chmod +x "$dir/attntune"
"$bin" tune "$src/configs/$name" --dry-run >"$dir/all.txt" || fail "dry run of the whole config"
all=$(grep -c '^[a-z0-9]*\.t[0-9]' "$dir/all.txt")
i=0
: >"$dir/shards.txt"
while [ "$i" -lt "$shards" ]; do
  cmd=$(printf '%s' "$command" | sed "s|/results|$dir|g")
  PATH="$dir:$PATH" SHARDS=$shards CONFIG=$src/configs/$name JOB_COMPLETION_INDEX=$i sh -c "$cmd" \
    >"$dir/shard-$i.txt" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || { cat "$dir/shard-$i.txt"; fail "pod $i's command exited $rc"; }
  grep '^[a-z0-9]*\.t[0-9]' "$dir/shard-$i.txt" | cut -d' ' -f1 >>"$dir/shards.txt"
  i=$((i + 1))
done
dealt=$(wc -l <"$dir/shards.txt")
distinct=$(sort -u "$dir/shards.txt" | wc -l)
echo "config: $all shapes; the $shards pods: $dealt shapes, $distinct distinct"
[ "$dealt" -eq "$all" ] && [ "$distinct" -eq "$all" ] || fail "the shards do not deal every shape once"
grep '^[a-z0-9]*\.t[0-9]' "$dir/all.txt" | cut -d' ' -f1 | sort >"$dir/a"
sort "$dir/shards.txt" >"$dir/b"
cmp -s "$dir/a" "$dir/b" || fail "the shards' shapes are not the config's"
echo "ok: every pod's command runs, and the $shards shards deal the $all shapes once each"
