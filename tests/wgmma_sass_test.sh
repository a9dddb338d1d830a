#!/bin/sh
# wgmma_sass_test.sh SOURCE_DIR — scripts/wgmma_sass.awk on four hand-written SASS listings in
# the shapes ptxas gave (docs/perf.md, decode step 16): fa3's (the first tile's wait for every
# group reached by a jump), the decode kernel's before step 16 (the wait for P V hoisted ahead of
# the exponentials) and after it (P V issued once S is in), and fa3 .wspp's with the turn passed
# after P V (a ping-pong arrive on each path); scripts/sass_loops.awk on a fifth.
# Fails when a count is read wrong.
set -eu
awk_file="$1/scripts/wgmma_sass.awk"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
check() { # name, expected "under/total", listing file
  got=$(awk -v key="$1" -v spill="-" -f "$awk_file" "$3" | sed -n 's/.*ex2 under P V \([0-9]*\/[0-9]*\).*/\1/p')
  if [ "$got" != "$2" ]; then echo "FAIL $1: ex2 under P V $got, expected $2"; fail=1; else echo "ok $1: $got"; fi
}
cat >"$d/fa3" <<'S'
        /*1400*/                   HGMMA.64x176x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT ;
        /*18d0*/                   HGMMA.64x128x16.F32.BF16 R112, R216, gdesc[UR12].tnspB, R112, gsb0 ;
        /*1d20*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*1d30*/                   BRA 0x1d50 ;
        /*1d40*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*1d50*/                   FMNMX R9, R24, R25, !PT ;
        /*1d60*/                   MUFU.EX2 R24, R24 ;
        /*1d70*/                   MUFU.EX2 R25, R25 ;
        /*1d80*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*1d90*/                   MUFU.EX2 R3, R3 ;
S
check fa3 2/3 "$d/fa3"
cat >"$d/hoisted" <<'S'
        /*3b30*/                   HGMMA.64x64x16.F32 R88, gdesc[UR16], R88, gsb0 ;
        /*3cc0*/                   HGMMA.64x128x16.F32 R24, R120, gdesc[UR16].tnspB, R24, gsb0 ;
        /*3cd0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*3ce0*/               @!P0 BRA 0x4630 ;
        /*3e90*/                   FSEL R88, R88, -INF , !P5 ;
        /*4630*/                   FMNMX R9, R88, R89, !PT ;
        /*4640*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*4900*/                   MUFU.EX2 R88, R88 ;
        /*4980*/                   MUFU.EX2 R89, R89 ;
S
check hoisted 0/2 "$d/hoisted"
cat >"$d/late" <<'S'
        /*3b10*/                   HGMMA.64x64x16.F32 R88, gdesc[UR16], R88, gsb0 ;
        /*3b20*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*3b30*/               @!P0 BRA 0x4480 ;
        /*45e0*/                   HGMMA.64x128x16.F32 R24, R132, gdesc[UR16].tnspB, R24 ;
        /*4900*/                   MUFU.EX2 R88, R88 ;
        /*4e80*/                   HGMMA.64x128x16.F32 R24, R120, gdesc[UR8].tnspB, R24, gsb0 ;
        /*4f60*/                   MUFU.EX2 R16, R16 ;
        /*4f70*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*4fc0*/                   MUFU.EX2 R88, R88 ;
S
check late 2/3 "$d/late"
# fa3 .wspp with the turn passed after P V (v27, tried, not kept): each path arrives before its wait, so the
# first tile's wait for every group sits a few instructions past the jump.
cat >"$d/pingpong" <<'S'
        /*1cb0*/                   QGMMA.64x224x32.F32.E4M3.E4M3 R24, gdesc[UR12], RZ, !UPT ;
        /*2000*/                   QGMMA.64x136x32.F32.E4M3.E4M3 R136, R228, gdesc[UR12], R136, gsb0 ;
        /*2010*/               @P0 BAR.ARV R11, 0x100 ;
        /*2020*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*2030*/                   BRA 0x2080 ;
        /*2040*/                   PLOP3.LUT P0, PT, PT, PT, UP0, 0x80, 0x0 ;
        /*2050*/                   IMAD.U32 R11, RZ, RZ, UR9 ;
        /*2060*/               @P0 BAR.ARV R11, 0x100 ;
        /*2070*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*2080*/                   MUFU.EX2 R24, R24 ;
        /*2090*/                   MUFU.EX2 R25, R25 ;
        /*20a0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*20b0*/                   MUFU.EX2 R3, R3 ;
S
check pingpong 2/3 "$d/pingpong"

# scripts/sass_loops.awk: two functions (addresses start again at 0), a loop in each; the first
# function's loop is under the minimum, a forward branch and a branch into the other function
# are not loops.
loops_awk="$1/scripts/sass_loops.awk"
cat >"$d/loops" <<'S'
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0020*/               @P0 BRA 0x10 ;
        /*0030*/                   EXIT ;
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   BRA 0x30 ;
        /*0020*/                   LDSM.16.M88.4 R8, [R2] ;
        /*0030*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0040*/                   F2FP.F16.E4M3.UNPACK_B R9, R9 ;
        /*0050*/                   MUFU.EX2 R3, R3 ;
        /*0060*/              @!P1 BRA 0x20 ;
        /*0070*/                   BRA 0x70 ;
S
got=$(awk -v key=k -v min=3 -f "$loops_awk" "$d/loops")
want="k function 1 loop 0x20-0x60: 5 instructions, HMMA 1, HGMMA 0, QGMMA 0, F2FP 1, PRMT 0, MUFU 1, LDSM 1, LDS 0, FMUL 0, FFMA 0, SHFL 0"
if [ "$got" != "$want" ]; then printf 'FAIL loops: got\n%s\nexpected\n%s\n' "$got" "$want"; fail=1; else echo "ok loops"; fi

# scripts/sass_wait.awk: a kernel that waits before its first global access, one whose
# read-only load ptxas placed above the wait (the race), and one that never waits (said, not
# called a race: it may be launched plainly).
wait_awk="$1/scripts/sass_wait.awk"
cat >"$d/wait" <<'S'
		Function : safe
        /*0000*/                   IMAD R2, R0, 0x4, RZ ;
        /*0010*/                   ACQBULK ;
        /*0020*/                   LDGSTS.E.BYPASS.128 [R19], desc[UR16][R16.64], P2 ;
		Function : hoisted
        /*0000*/               @P0 LDG.E.CONSTANT R2, desc[UR16][R2.64] ;
        /*0010*/                   ACQBULK ;
        /*0020*/                   STG.E desc[UR4][R2.64], R5 ;
		Function : plain
        /*0000*/                   LDG.E R2, desc[UR16][R2.64] ;
S
got=$(awk -v key=k -f "$wait_awk" "$d/wait")
want="k safe: 3 instructions, wait at 2, first global access after it at 3
k hoisted: 3 instructions, wait at 2, first global access after it at 3, RACE: 1 global accesses before it
k plain: 1 instructions, wait at none, first global access after it at none, no wait"
if [ "$got" != "$want" ]; then printf 'FAIL wait: got\n%s\nexpected\n%s\n' "$got" "$want"; fail=1; else echo "ok wait"; fi
exit $fail
