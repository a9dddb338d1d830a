# sass_desc.awk — over `cuobjdump -sass` of a cubin: for each function, every memory descriptor a
# global access reads (desc[URn]: LDG, STG, LDGSTS, ...) must be a uniform register the function
# writes (URn, or its pair's other half). One that is never written is printed with DESC: ptxas
# (CUDA 13.0) emits such accesses when it drops the createpolicy behind a `.L2::cache_hint`, and
# the GPU then stops with an illegal instruction (docs/perf.md, decode step 34b).
# Prints "<key> <function>: DESC <instruction>" per such access; nothing when all are written.
function flush(   i) {
  for (i = 1; i <= n_use; i++)
    if (!(use_reg[i] in written) && !((use_reg[i] + 1) in written))
      printf "%s %s: DESC %s\n", key, fn, use_txt[i]
  delete written
  n_use = 0
}
/Function : / { if (fn != "") flush(); fn = $3; next }
/^[[:space:]]+\/\*[0-9a-f]+\*\// {
  line = $0
  sub(/^[[:space:]]+\/\*[0-9a-f]+\*\/[[:space:]]+/, "", line)
  sub(/[[:space:]]*;.*$/, "", line)
  ins = line
  sub(/^@!?U?P[0-9T]+[[:space:]]+/, "", ins) # a predicate guard
  split(ins, w, /[[:space:],]+/)
  if (w[2] ~ /^UR[0-9]+$/) {
    r = substr(w[2], 3) + 0
    written[r] = 1
    if (w[1] ~ /\.64|WIDE/) written[r + 1] = 1
  }
  s = ins
  while (match(s, /desc\[UR[0-9]+\]/)) {
    n_use++
    use_reg[n_use] = substr(s, RSTART + 7, RLENGTH - 8) + 0
    use_txt[n_use] = ins
    s = substr(s, RSTART + RLENGTH)
  }
}
END { if (fn != "") flush() }
