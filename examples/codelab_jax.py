#!/usr/bin/env python3
"""The attention codelab's experiments in JAX, with attntune as one more column.

Columns: naive JAX attention (f32: scores, softmax, PV), XLA f32 and bf16
(jax.nn.dot_product_attention(implementation="xla")), cuDNN bf16 (implementation="cudnn") and
attntune bf16 (attntune.jax.dot_product_attention). Experiments, q/k/v (B, T, N, H):

  seq     B4 N8 H64, T 64..1024
  causal  B4 N8 H64, T 128..2048, is_causal
  batch   B 1..16 at T 256, N8 H64
  heads   (2, 64, 8, 64) with 8, 2 and 1 key/value heads (MHA, GQA, MQA)

Every attntune output is checked against the naive JAX result (atol/rtol 1e-2 for bf16); the
exit status is 1 if one differs. Tables are printed; PNG charts are written to --out when
matplotlib is installed.

    python examples/codelab_jax.py [--db tuned.db] [--out codelab-jax] [--reps 20]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import attntune
import attntune.jax as atj

EXPERIMENTS = {
    "seq": ("T", [dict(b=4, t=t, n=8, k=8, h=64, causal=False) for t in (64, 128, 256, 512, 1024)]),
    "causal": ("T", [dict(b=4, t=t, n=8, k=8, h=64, causal=True) for t in (128, 256, 512, 1024, 2048)]),
    "batch": ("B", [dict(b=b, t=256, n=8, k=8, h=64, causal=False) for b in (1, 2, 4, 8, 16)]),
    "heads": ("kv heads", [dict(b=2, t=64, n=8, k=k, h=64, causal=False) for k in (8, 2, 1)]),
}
X_OF = {"seq": "t", "causal": "t", "batch": "b", "heads": "k"}


def naive_attention(q, k, v, causal):
    """Scores, softmax and PV in f32, K/V heads repeated for GQA/MQA."""
    q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
    group = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)
    s = jnp.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1])
    if causal:
        t, n = s.shape[-2], s.shape[-1]
        s = jnp.where(jnp.tril(jnp.ones((t, n), bool)), s, -jnp.inf)
    return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(s, axis=-1), v)


def columns(db):
    xla = lambda dt: (lambda q, k, v, c: jax.nn.dot_product_attention(  # noqa: E731
        q.astype(dt), k.astype(dt), v.astype(dt), is_causal=c, implementation="xla"))
    return {
        "naive f32": lambda q, k, v, c: naive_attention(q, k, v, c),
        "XLA f32": xla(jnp.float32),
        "XLA bf16": xla(jnp.bfloat16),
        "cuDNN bf16": lambda q, k, v, c: jax.nn.dot_product_attention(q, k, v, is_causal=c,
                                                                      implementation="cudnn"),
        "attntune bf16": lambda q, k, v, c: atj.dot_product_attention(q, k, v, is_causal=c, db=db),
    }


def timed(fn, args, reps):
    """Median over 5 rounds of the mean time of `reps` back-to-back calls, in ms."""
    fn(*args).block_until_ready()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            out = fn(*args)
        out.block_until_ready()
        rounds.append((time.perf_counter() - t0) * 1e3 / reps)
    return statistics.median(rounds)


def run(args):
    cols = columns(args.db)
    results, failures = {}, []
    rng = np.random.default_rng(0)
    for name, (xlabel, cases) in EXPERIMENTS.items():
        rows = []
        for case in cases:
            b, t, n, k, h, causal = (case[x] for x in ("b", "t", "n", "k", "h", "causal"))
            q = jnp.asarray(rng.standard_normal((b, t, n, h), np.float32), jnp.bfloat16)
            kk = jnp.asarray(rng.standard_normal((b, t, k, h), np.float32), jnp.bfloat16)
            v = jnp.asarray(rng.standard_normal((b, t, k, h), np.float32), jnp.bfloat16)
            row = {"case": case}
            ref = None
            for col, f in cols.items():
                fn = jax.jit(f, static_argnums=3)
                try:
                    out = fn(q, kk, v, causal)
                    row[col] = timed(lambda *a: fn(*a, causal), (q, kk, v), args.reps)
                except Exception as e:  # e.g. cuDNN refusing a shape
                    row[col] = None
                    row.setdefault("notes", []).append(f"{col}: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
                    continue
                if col == "naive f32":
                    ref = np.asarray(out, np.float32)
                if col == "attntune bf16":
                    got = np.asarray(out, np.float32)
                    err = float(np.max(np.abs(got - ref)))
                    row["max_err"] = err
                    if not np.allclose(got, ref, atol=1e-2, rtol=1e-2):
                        failures.append(f"{name} {case}: attntune differs from naive JAX (max |err| {err:.3g})")
            if "attntune bf16" in row and row["attntune bf16"] is not None:
                row["plan"] = str(attntune.plan_info(q, kk, v, is_causal=causal, db=args.db).impl)
            rows.append(row)
        results[name] = (xlabel, rows)
        print_table(name, xlabel, rows, list(cols))
    return results, failures


def print_table(name, xlabel, rows, cols):
    print(f"\n== {name}: time per call in ms (median), attntune checked against naive f32")
    head = f"{'case':<26}" + "".join(f"{c:>15}" for c in cols) + f"{'max|err|':>10}  plan"
    print(head)
    for r in rows:
        c = r["case"]
        label = f"B{c['b']} T{c['t']} N{c['n']}/{c['k']} H{c['h']}{' causal' if c['causal'] else ''}"
        cells = "".join(f"{r[col]:>15.4f}" if r.get(col) is not None else f"{'n/a':>15}" for col in cols)
        err = f"{r['max_err']:>10.2e}" if "max_err" in r else f"{'':>10}"
        print(f"{label:<26}{cells}{err}  {r.get('plan', '')}")
        for note in r.get("notes", []):
            print(f"    {note}")


def plot(results, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\nmatplotlib not installed: no plots")
        return
    os.makedirs(out_dir, exist_ok=True)
    for name, (xlabel, rows) in results.items():
        fig, ax = plt.subplots(figsize=(7, 4.5))
        xs = [r["case"][X_OF[name]] for r in rows]
        for col in [c for c in rows[0] if c not in ("case", "notes", "max_err", "plan")]:
            ys = [r.get(col) for r in rows]
            pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=col)
        if name != "heads":
            ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("ms per call")
        ax.set_title(f"codelab in JAX: {name}")
        ax.legend()
        ax.grid(True, alpha=0.3)
        path = os.path.join(out_dir, f"codelab_jax_{name}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        print(f"wrote {path}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", default=None, help="tuning cache (default: $ATTNTUNE_DB, else none)")
    p.add_argument("--out", default="codelab-jax", help="folder for the PNG charts")
    p.add_argument("--reps", type=int, default=20, help="calls per timing round")
    args = p.parse_args()
    print(f"JAX {jax.__version__} on {jax.devices()[0].device_kind}, attntune {attntune.__version__}")
    results, failures = run(args)
    plot(results, args.out)
    if failures:
        print("\nFAILED checks:\n  " + "\n  ".join(failures))
        return 1
    print("\nall attntune outputs match naive JAX (atol 1e-2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
