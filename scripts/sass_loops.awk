# sass_loops.awk — over the SASS lines of a cubin (cuobjdump -sass, instruction lines only), each
# loop of at least `min` instructions: a branch back to an address of the same function (the
# addresses start again at 0 in each function). Per loop, its instructions and how many of them
# are of the opcodes that bound an attention kernel's tile: tensor-core MMAs (HMMA; HGMMA and
# QGMMA, 16-bit and FP8 wgmma), conversions and packs (F2FP), byte permutes (PRMT), exponentials
# (MUFU), shared loads (LDSM, other LDS), FP32 multiplies and FMAs, shuffles. Where the K/V loop
# has one path, its body is what one warp issues per tile; ptxas may lay several paths (masked
# and unmasked tiles) inside one range, so compare a kernel with its own variant, not across
# families. Counted before a change is timed (docs/perf.md).
# Variables in: key (printed first), min (default 200).
function opcode(line,    f, i) {
  n_f = split(line, f, /[ \t]+/)
  for (i = 1; i <= n_f; i++) {
    if (f[i] == "" || f[i] ~ /^\/\*[0-9a-f]+\*\/$/ || f[i] ~ /^@!?U?P[0-9T]+$/) continue
    return f[i]
  }
  return ""
}
function hex(s,    i, v) { # POSIX awk has no strtonum
  v = 0
  for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
  return v
}
BEGIN { if (min == "") min = 200 }
{
  if (!match($0, /\/\*[0-9a-f]+\*\//)) next
  addr = hex(substr($0, RSTART + 2, RLENGTH - 4))
  if (n > 0 && addr <= last) { fn++; delete at; n = 0 }
  last = addr
  n++
  at[addr] = n
  op[n] = opcode($0)
  if (match($0, / BRA 0x[0-9a-f]+/)) {
    target = hex(substr($0, RSTART + 7, RLENGTH - 7))
    if (target <= addr && (target in at) && n - at[target] + 1 >= min) {
      split("HMMA HGMMA QGMMA F2FP PRMT MUFU LDSM LDS FMUL FFMA SHFL", names, " ")
      delete c
      for (i = at[target]; i <= n; i++) {
        o = op[i]
        sub(/\..*/, "", o)
        c[o]++
      }
      line = sprintf("%s function %d loop 0x%x-0x%x: %d instructions", key, fn, target, addr, n - at[target] + 1)
      for (j = 1; j <= 11; j++) line = line sprintf(", %s %d", names[j], c[names[j]] + 0)
      print line
    }
  }
}
