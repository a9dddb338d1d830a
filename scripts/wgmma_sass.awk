# wgmma_sass.awk — over the SASS lines of one kernel (cuobjdump -sass, instruction lines only),
# count what scripts/wgmma_sass.sh reports: dummy wgmma groups, the MUFU.EX2 issued while a P V
# wgmma is in flight, instructions. A P V wgmma is one whose A operand is a register
# ("[HQ]GMMA... Rd, Ra, gdesc..."); its window closes at the next wait for every group
# ("DEPBAR.LE gsb0, 0x0"), unless that wait is the first one within a few instructions past an
# unconditional jump (a path that only the first tile takes, as in fa3: "DEPBAR.LE gsb0, 0x1;
# BRA; DEPBAR.LE gsb0, 0x0", or with a ping-pong arrive on each path, "BAR.ARV; DEPBAR 0x1; BRA;
# ...; BAR.ARV; DEPBAR 0x0"). Where ptxas hoists the wait for P V ahead of the softmax, the
# exponentials fall outside every window: under = 0.
# Variables in: key, spill (printed as they are).
/RZ, gdesc\[URZ\]/ { dummy++ }
/[HQ]GMMA\.[^ ]* R[0-9]+, R[0-9]+, gdesc/ { inwin = 1 }
/DEPBAR\.LE gsb0, 0x0/ {
  if (inwin && !(armed && n - last_bra <= 4)) inwin = 0
  armed = 0
}
/MUFU\.EX2/ { total++; if (inwin) under++ }
/\*\/ +BRA 0x/ { last_bra = n + 1; armed = 1 }
{ n++ }
END { printf "%-58s dummy wgmma %d  ex2 under P V %d/%d  instructions %d  %s\n", key, dummy, under + 0, total + 0, n, spill }
