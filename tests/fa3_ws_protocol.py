#!/usr/bin/env python3
"""fa3_ws_protocol.py [RUNS] — a model of the synchronization of templates/fa3.cu's warp-specialized
kernel, persistent form (FA3_PERSISTENT 1), with and without the speculative row max (FA3_SPEC,
which frees Q and each K tile after the softmax instead of after Q K^T), run under random
interleavings; no GPU needed.

What it models, step for step as fa3_ws_produce and fa3_ws_consume (and the kernel's ping-pong
prologue and epilogue) do it: one producer thread issuing TMA copies (landing at random later
times) of Q and of each K/V tile into a ring of STAGES stages; 2 or 3 consumer warpgroups, each
arriving 4 times (one per warp) on the empty barriers; mbarriers with parity waits (a fresh
barrier's phase "-1", parity 1, counts as completed) and expected transactions; Q's full and
empty pair; the named barriers of the ping-pong (bar.sync by one warpgroup plus bar.arrive by
another completes a generation). A CTA's work tiles get random K/V tile counts, 0 included
(bottom-right rows above the first key).

What it checks: no deadlock; every read sees the tile it expects (ring position, work tile);
no copy lands in a buffer a consumer still reads; no barrier gets more arrivals than its count
in one phase, no named barrier two arrivals of one warpgroup in one generation; every barrier
ends balanced. It checks the protocol, not the CUDA code: a change to the kernel's barriers
belongs here too.

K/V multicast (FA3_MULTICAST 2, one work tile per CTA): two CTAs of a cluster, each producer
issuing half of every K/V tile into both CTAs (each half completes on the full barrier of the
CTA it lands in, possibly before that CTA's producer announced the tile), each consumer warp
releasing a stage on the empty barriers of both CTAs, the cluster barrier (arrived at after the
loop by consumers, after the copies by producers, waited for by all before they leave), and a CTA
gone once its threads are. Besides the
checks above: no arrival or copy reaches a CTA that has left. Two broken forms (empty barriers
that count one CTA's consumers, no cluster barrier before leaving) must be caught.
"""
import random
import sys

from mbarrier_model import MBarrier


class NamedBarrier:
    """bar.sync / bar.arrive with 256 threads: two warpgroups complete a generation."""

    def __init__(self):
        self.generation, self.arrived = 0, set()

    def arrive(self, who):
        assert who not in self.arrived, f"{who} arrives twice in one generation"
        self.arrived.add(who)
        generation = self.generation
        if len(self.arrived) == 2:
            self.generation, self.arrived = self.generation + 1, set()
        return generation


def interleave(rnd, agents, in_flight, readers, holds, landing=None):
    """Runs the agents (generators) one step at a time in random order, landing the copies in
    flight (buffer, tag, barrier) at random moments, until all are done."""
    live = list(range(len(agents)))
    steps = 0
    while live or in_flight:
        steps += 1
        assert steps < 10**6, "no progress: deadlock"
        if in_flight and (not live or rnd.random() < 0.3):
            buf, tag, bar = in_flight.pop(rnd.randrange(len(in_flight)))
            if landing:
                landing(buf)
            assert not readers.get(buf), f"a copy lands in {buf} while {readers[buf]} read it"
            holds[buf] = tag
            bar.complete_tx(1)
            continue
        i = rnd.choice(live)
        try:
            next(agents[i])
        except StopIteration:
            live.remove(i)


def run(seed, consumers, stages, pingpong, tiles, spec):
    rnd = random.Random(seed)
    warps = 4 * consumers
    bar_q, bar_q_empty = MBarrier(1), MBarrier(warps)
    full_k = [MBarrier(1) for _ in range(stages)]
    full_v = [MBarrier(1) for _ in range(stages)]
    empty_k = [MBarrier(warps) for _ in range(stages)]
    empty_v = [MBarrier(warps) for _ in range(stages)]
    named = {i: NamedBarrier() for i in range(1, consumers + 1)}
    holds, readers, in_flight = {}, {}, []

    def read(buf, who, tag):
        assert holds.get(buf) == tag, f"{who} reads {buf} holding {holds.get(buf)}, wants {tag}"
        readers.setdefault(buf, set()).add(who)

    def done_reading(buf, who):
        readers[buf].discard(who)

    def copy(buf, tag, bar):
        assert not readers.get(buf), f"copy into {buf} issued while {readers[buf]} read it"
        in_flight.append((buf, tag, bar))

    def wait(bar, parity):
        while not bar.parity_done(parity):
            yield

    def named_sync(i, who):
        generation = named[i].arrive(who)
        while named[i].generation == generation:
            yield

    def producer():  # fa3_ws_produce over the CTA's work tiles
        it = 0
        for j, n_tiles in enumerate(tiles):
            yield from wait(bar_q_empty, (j & 1) ^ 1)
            bar_q.arrive_expect_tx(1)
            copy("q", j, bar_q)
            for t in range(n_tiles):
                u = it + t
                s, phase = u % stages, (u // stages) & 1
                yield from wait(empty_k[s], phase ^ 1)
                full_k[s].arrive_expect_tx(1)
                copy(("k", s), u, full_k[s])
                yield from wait(empty_v[s], phase ^ 1)
                full_v[s].arrive_expect_tx(1)
                copy(("v", s), u, full_v[s])
                yield
            it += n_tiles

    def consumer(cw):  # the kernel's consumer part: fa3_ws_consume per work tile
        me, next_cw = f"consumer {cw}", (cw + 1) % consumers
        if pingpong and cw == consumers - 1:
            named[1].arrive(me)
        it = 0
        for j, n_tiles in enumerate(tiles):
            yield from wait(bar_q, j & 1)
            if n_tiles == 0:
                bar_q_empty.arrive(4)
            for t in range(n_tiles):
                u = it + t
                s, sp = u % stages, (u + stages - 1) % stages
                yield from wait(full_k[s], (u // stages) & 1)
                if t > 0:
                    yield from wait(full_v[sp], ((u - 1) // stages) & 1)
                if pingpong:
                    yield from named_sync(1 + cw, me)
                read("q", me, j)  # Q K^T issued
                read(("k", s), me, u)
                if pingpong:
                    named[1 + next_cw].arrive(me)
                if t > 0:
                    read(("v", sp), me, u - 1)  # P V of the previous tile issued
                yield
                yield

                def release_k_q():
                    done_reading("q", me)
                    done_reading(("k", s), me)
                    empty_k[s].arrive(4)
                    if t == n_tiles - 1:
                        bar_q_empty.arrive(4)

                if not spec:
                    release_k_q()  # wait_group 1: Q K^T is done
                yield  # softmax (FA3_SPEC: its rare path reads Q and this K tile again)
                if spec:
                    release_k_q()
                if t > 0:  # wait_group 0: P V is done
                    done_reading(("v", sp), me)
                    empty_v[sp].arrive(4)
            if n_tiles > 0:
                u = it + n_tiles - 1
                s = u % stages
                yield from wait(full_v[s], (u // stages) & 1)
                read(("v", s), me, u)
                yield
                done_reading(("v", s), me)
                empty_v[s].arrive(4)
            it += n_tiles
            yield  # epilogue
        if pingpong and cw == 0:
            yield from named_sync(1, me)

    interleave(rnd, [producer()] + [consumer(c) for c in range(consumers)], in_flight, readers, holds)
    for i, nb in named.items():
        assert not nb.arrived, f"named barrier {i} ends with arrivals nobody waited for"
    for bar in [bar_q, bar_q_empty] + full_k + full_v + empty_k + empty_v:
        assert bar.arrivals == 0 and bar.tx == 0, "an mbarrier ends with a phase half done"


def run_multicast(seed, consumers, stages, pingpong, n_tiles, spec, broken=None):
    """Two CTAs, one work tile each (n_tiles K/V tiles, the same for both: no mask)."""
    rnd = random.Random(seed)
    warps = 4 * consumers
    ctas = (0, 1)
    empty_count = warps if broken == "one CTA's consumers" else 2 * warps
    bar_q = [MBarrier(1) for _ in ctas]
    full_k = [[MBarrier(1, tx_may_lead=True) for _ in range(stages)] for _ in ctas]
    full_v = [[MBarrier(1, tx_may_lead=True) for _ in range(stages)] for _ in ctas]
    empty_k = [[MBarrier(empty_count) for _ in range(stages)] for _ in ctas]
    empty_v = [[MBarrier(empty_count) for _ in range(stages)] for _ in ctas]
    named = [{i: NamedBarrier() for i in range(1, consumers + 1)} for _ in ctas]
    cluster = {"arrived": 0, "count": 2 * (1 + consumers)}
    running = {r: 1 + consumers for r in ctas}  # threads (agents) not yet exited, per CTA
    holds, readers, in_flight = {}, {}, []

    def alive(r, what):
        assert running[r] > 0, f"{what} reaches CTA {r}, which has left"

    def read(buf, who, tag):
        assert holds.get(buf) == tag, f"{who} reads {buf} holding {holds.get(buf)}, wants {tag}"
        readers.setdefault(buf, set()).add(who)

    def done_reading(buf, who):
        readers.get(buf, set()).discard(who)

    def copy(buf, tag, bar):
        assert not readers.get(buf), f"copy into {buf} issued while {readers[buf]} read it"
        in_flight.append((buf, tag, bar))

    def release(bars, r, s):
        bars[r][s].arrive(4)
        if broken != "one CTA's consumers":
            alive(1 - r, "an arrival")
            bars[1 - r][s].arrive(4)

    def wait(bar, parity):
        while not bar.parity_done(parity):
            yield

    def named_sync(r, i, who):
        generation = named[r][i].arrive(who)
        while named[r][i].generation == generation:
            yield

    def cluster_arrive():
        cluster["arrived"] += 1

    def cluster_wait():
        while broken != "no cluster barrier" and cluster["arrived"] < cluster["count"]:
            yield

    def producer(r):  # fa3_ws_produce: Q alone, each K/V tile half by half into both CTAs
        bar_q[r].arrive_expect_tx(1)
        copy((r, "q"), 0, bar_q[r])
        for u in range(n_tiles):
            s, phase = u % stages, (u // stages) & 1
            for kind, full, empty in (("k", full_k, empty_k), ("v", full_v, empty_v)):
                yield from wait(empty[r][s], phase ^ 1)
                full[r][s].arrive_expect_tx(2)  # the whole tile: this CTA's half and the other's
                for dest in ctas:
                    copy((dest, kind, s, r), u, full[dest][s])
                yield
        cluster_arrive()
        yield from cluster_wait()
        running[r] -= 1

    def consumer(r, cw):
        me, next_cw = f"CTA {r} consumer {cw}", (cw + 1) % consumers
        if pingpong and cw == consumers - 1 and n_tiles > 0:
            named[r][1 + next_cw].arrive(me)
        yield from wait(bar_q[r], 0)
        for t in range(n_tiles):
            u = t
            s, sp = u % stages, (u + stages - 1) % stages
            yield from wait(full_k[r][s], (u // stages) & 1)
            if t > 0:
                yield from wait(full_v[r][sp], ((u - 1) // stages) & 1)
            if pingpong:
                yield from named_sync(r, 1 + cw, me)
            read((r, "q"), me, 0)
            for half in ctas:
                read((r, "k", s, half), me, u)
            if pingpong and not (cw == consumers - 1 and t == n_tiles - 1):
                named[r][1 + next_cw].arrive(me)
            if t > 0:
                for half in ctas:
                    read((r, "v", sp, half), me, u - 1)
            yield
            yield

            def release_k():
                for half in ctas:
                    done_reading((r, "k", s, half), me)
                release(empty_k, r, s)

            if not spec:
                release_k()
            yield  # softmax
            if spec:
                release_k()
            if t > 0:
                for half in ctas:
                    done_reading((r, "v", sp, half), me)
                release(empty_v, r, sp)
        if n_tiles > 0:  # the last tile's P V; its stage is never refilled, so not released
            s = (n_tiles - 1) % stages
            yield from wait(full_v[r][s], ((n_tiles - 1) // stages) & 1)
            for half in ctas:
                read((r, "v", s, half), me, n_tiles - 1)
            yield
            for half in ctas:
                done_reading((r, "v", s, half), me)
        done_reading((r, "q"), me)
        cluster_arrive()
        yield  # epilogue
        yield from cluster_wait()
        running[r] -= 1

    agents = [producer(r) for r in ctas] + [consumer(r, c) for r in ctas for c in range(consumers)]
    interleave(rnd, agents, in_flight, readers, holds, landing=lambda buf: alive(buf[0], "a copy"))
    for r in ctas:
        for i, nb in named[r].items():
            assert not nb.arrived, f"CTA {r}: named barrier {i} ends with arrivals nobody waited for"
        for bar in [bar_q[r]] + full_k[r] + full_v[r]:
            assert bar.arrivals == 0 and bar.tx == 0, "a full mbarrier ends with a phase half done"


def multicast_trial(seed, broken=None):
    rnd = random.Random(seed * 11 + 5)
    config = (rnd.choice([2, 3]), rnd.choice([2, 3, 4]), rnd.choice([0, 1]), rnd.choice([0, 1, 2, 3, 5, 8]),
              rnd.choice([0, 1]))
    try:
        run_multicast(seed, *config, broken=broken)
        return None
    except AssertionError as e:
        return f"{config}: {e}"


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    for seed in range(runs):
        rnd = random.Random(seed * 7 + 1)
        consumers, stages, pingpong = rnd.choice([2, 3]), rnd.choice([2, 3, 4]), rnd.choice([0, 1])
        tiles = [rnd.choice([0, 1, 2, 3, 5, 8]) for _ in range(rnd.randint(1, 6))]
        spec = rnd.choice([0, 1])
        try:
            run(seed, consumers, stages, pingpong, tiles, spec)
        except AssertionError as e:
            print(f"FAIL seed {seed}: {consumers} consumers, {stages} stages, ping-pong {pingpong}, "
                  f"speculative max {spec}, K/V tiles per work tile {tiles}: {e}")
            return 1
    for seed in range(runs):
        failure = multicast_trial(seed)
        if failure:
            print(f"FAIL seed {seed}, K/V multicast (consumers, stages, ping-pong, K/V tiles, "
                  f"speculative max) {failure}")
            return 1
    # the model can fail: each broken multicast protocol is caught within a few hundred runs
    for broken in ("one CTA's consumers", "no cluster barrier"):
        if not any(multicast_trial(seed, broken) for seed in range(300)):
            print(f"FAIL: the model never catches the broken multicast protocol: {broken}")
            return 1
    print(f"ok: {runs} random interleavings of the persistent warp-specialized protocol and {runs} "
          "of K/V multicast; 2 broken multicast protocols caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
