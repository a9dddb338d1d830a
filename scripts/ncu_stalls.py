#!/usr/bin/env python3
"""Warp-stall samples of one kernel from ncu's source page, by warp role.

  ncu ... --section SourceCounters -o k ...; ncu -i k.ncu-rep --page source --csv --print-source sass > k.csv
  scripts/ncu_stalls.py k.csv [--top N] [--ops N]

A warp-specialized kernel's roles are told apart by setmaxnreg: SASS after USETMAXREG.TRY_ALLOC
(the consumers raising their registers) is counted as "consumer", after USETMAXREG.DEALLOC (the
producer or widening warps giving theirs back) as "helper", before either as "prologue". For each
role: its samples, instructions executed and largest stall reasons; then the N instructions with
the most samples in each role, with their two largest reasons. --ops N adds each role's
instructions executed by opcode (the N largest, the mnemonic without its modifiers): divided by
the role's warps and K/V tiles, the per-tile breakdown docs/perf.md quotes."""
import argparse
import collections
import csv
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--ops", type=int, default=0)
    args = ap.parse_args()
    rows = list(csv.reader(open(args.csv, newline="")))
    header = next((i for i, r in enumerate(rows) if "Source" in r and "# Samples" in r), None)
    if header is None:
        sys.exit(f"{args.csv}: no header row with 'Source' and '# Samples' (ncu --page source --csv?)")
    col = {name: i for i, name in enumerate(rows[header])}
    stalls = [n for n in rows[header] if n.startswith("stall_") and "Not Issued" not in n]

    def num(r, name):
        v = r[col[name]] if col[name] < len(r) else ""
        return int(v.replace(",", "")) if v.strip().lstrip("-").replace(",", "").isdigit() else 0

    role, reasons, samples, insts, top = "prologue", {}, collections.Counter(), collections.Counter(), {}
    ops = {}
    for r in rows[header + 1:]:
        if len(r) <= col["Source"]:
            continue
        src = r[col["Source"]].strip()
        if "USETMAXREG" in src:
            role = "helper" if "DEALLOC" in src else "consumer"
        n = num(r, "# Samples")
        samples[role] += n
        insts[role] += num(r, "Instructions Executed")
        if src:
            words = src.split()
            op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
            ops.setdefault(role, collections.Counter())[op.split(".")[0]] += num(r, "Instructions Executed")
        per = reasons.setdefault(role, collections.Counter())
        mine = collections.Counter({s[6:]: num(r, s) for s in stalls})
        per.update(mine)
        if n:
            top.setdefault(role, []).append((n, src[:64], mine.most_common(2)))
    for role in samples:
        total = max(samples[role], 1)
        worst = ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in reasons[role].most_common(8))
        print(f"{role}: {samples[role]} samples, {insts[role]} instructions; {worst}")
        for n, src, st in sorted(top.get(role, []), key=lambda x: -x[0])[: args.top]:
            print(f"  {100 * n / total:5.1f}%  {src:64s} {', '.join(f'{k} {v}' for k, v in st)}")
        if args.ops:
            print("  by opcode: " + ", ".join(f"{k} {v}" for k, v in ops.get(role, collections.Counter()).most_common(args.ops)))


if __name__ == "__main__":
    main()
