# sass_wait.awk — over a cubin's SASS (cuobjdump -sass, whole output: its "Function :" lines name
# the kernels), where each kernel waits for the grid before it (griddepcontrol.wait, SASS ACQBULK)
# and which global memory instructions come before that wait. A kernel launched as a programmatic
# dependent may run while the kernel before it still writes its inputs, so a global access before
# the wait is a race; ptxas has hoisted read-only (.nc) loads above it (docs/perf.md, decode step
# 27). Prints a line per kernel; "RACE" where a global access comes before the wait ("no wait":
# a kernel that never waits, fine only where it is launched plainly).
# Variables in: key (printed first).
function report() {
  if (fn == "") return
  printf "%s %s: %d instructions, wait at %s, first global access after it at %s%s\n", key, fn, n,
         acq ? acq : "none", first ? first : "none",
         !acq ? ", no wait" : before ? sprintf(", RACE: %d global accesses before it", before) : ""
}
/Function :/ { report(); fn = $3; n = 0; acq = 0; before = 0; first = 0; next }
/^[ \t]+\/\*[0-9a-f]+\*\// {
  n++
  if (!acq && $0 ~ /ACQBULK/) acq = n
  if ($0 ~ /[ \t](LDG|STG|LDGSTS|ATOMG|RED|UTMALDG|UTMASTG|UBLKCP|UTMAPF|UBLKPF|CCTL)[. \t]/) {
    if (!acq) before++
    else if (!first) first = n
  }
}
END { report() }
