#!/usr/bin/env python3
"""How evenly fa3's causal work tiles spread over the SMs, by order and by schedule (a model).

  scripts/fa3_schedule_model.py [--batch B] [--q-heads N] [--kv-heads K] [--seq-len T]
                                [--head-dim D] [--block-m BM] [--block-n BN] [--ctas C]

A causal work tile (query block m of one batch and head, T = S) reads m * BM / BN + 1 K/V tiles,
which stand here for its time. Three orders of the tiles, as templates/fa3.cu writes them:
  v43    query block from the last down, then batch, then head (fa3_work_tile, .pers's order);
  v44    the same within groups of heads whose K/V fit 16 MB, group after group
         (fa3_grouped_work_tile, the causal grid's order);
  alt    v44's groups, every second one rising instead of falling.
Two schedules of C CTAs:
  snake    .pers's static one (fa3_pers_tile_index): rounds of C tiles, every second backwards;
  dynamic  the block scheduler's: the next tile to whichever CTA frees first.
For each it prints the balance, the mean of the CTAs' K/V tiles over the busiest CTA's (1.0:
all end together), and the busiest CTA's count. docs/perf.md, "Fifty-first session", quotes it.
"""
import argparse
import heapq

L2_GROUP_BYTES = 16 << 20  # FA3_L2_GROUP_BYTES


def group_kv_heads(kv_pairs, seq_len, row_bytes):
    """fa3_group_kv_heads: the most K/V heads whose K and V fit, a divisor of all of them."""
    fit = L2_GROUP_BYTES // (2 * seq_len * row_bytes)
    if fit >= kv_pairs:
        return kv_pairs
    g = max(1, fit)
    while kv_pairs % g:
        g -= 1
    return g


def orders(a):
    m_blocks = -(-a.seq_len // a.block_m)
    pairs = a.batch * a.q_heads
    gqa = a.q_heads // a.kv_heads
    group = group_kv_heads(pairs // gqa, a.seq_len, a.head_dim * 2) * gqa  # q-head pairs a group
    group_tiles = group * m_blocks

    def length(m):
        return m * a.block_m // a.block_n + 1

    def v43(i):
        return length(m_blocks - 1 - i // pairs)

    def v44(i):
        return length(m_blocks - 1 - (i % group_tiles) // group)

    def alt(i):
        r = (i % group_tiles) // group
        return length(m_blocks - 1 - r if (i // group_tiles) % 2 == 0 else r)

    return pairs * m_blocks, group, {"v43": v43, "v44": v44, "alt": alt}


def snake(n_tiles, length, ctas):
    load = [0] * ctas
    for k in range(-(-n_tiles // ctas)):
        for x in range(ctas):
            i = k * ctas + (ctas - 1 - x if k & 1 else x)
            if i < n_tiles:
                load[x] += length(i)
    return load


def dynamic(n_tiles, length, ctas):
    free = [(0, x) for x in range(ctas)]
    for i in range(n_tiles):
        t, x = heapq.heappop(free)
        heapq.heappush(free, (t + length(i), x))
    return [t for t, _ in free]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--q-heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=0, help="default: --q-heads")
    p.add_argument("--seq-len", type=int, default=8192)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--block-m", type=int, default=128)
    p.add_argument("--block-n", type=int, default=128)
    p.add_argument("--ctas", type=int, default=132, help="the SMs: .pers's grid")
    a = p.parse_args()
    a.kv_heads = a.kv_heads or a.q_heads
    if a.q_heads % a.kv_heads:
        p.error(f"--q-heads {a.q_heads} is not a multiple of --kv-heads {a.kv_heads}")
    n_tiles, group, by_name = orders(a)
    print(f"{n_tiles} work tiles, groups of {group} (batch, q head) pairs, {a.ctas} CTAs")
    print(f"{'order':6} {'snake':>7} {'busiest':>8} {'dynamic':>8} {'busiest':>8}")
    for name, length in by_name.items():
        row = []
        for schedule in (snake, dynamic):
            load = schedule(n_tiles, length, a.ctas)
            row.append(f"{sum(load) / len(load) / max(load):7.3f} {max(load):8d}")
        print(f"{name:6} {row[0]} {row[1]}")


if __name__ == "__main__":
    main()
