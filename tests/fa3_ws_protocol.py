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

So that the model can fail, two broken forms of the producer must be caught: one that refills a
V stage without waiting for the consumers to free it, and one that loads the next work tile's Q
without waiting for the last Q K^T of the previous one.
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


def interleave(rnd, agents, in_flight, readers, holds):
    """Runs the agents (generators) one step at a time in random order, landing the copies in
    flight (buffer, tag, barrier) at random moments, until all are done."""
    live = list(range(len(agents)))
    steps = 0
    while live or in_flight:
        steps += 1
        assert steps < 10**6, "no progress: deadlock"
        if in_flight and (not live or rnd.random() < 0.3):
            buf, tag, bar = in_flight.pop(rnd.randrange(len(in_flight)))
            assert not readers.get(buf), f"a copy lands in {buf} while {readers[buf]} read it"
            holds[buf] = tag
            bar.complete_tx(1)
            continue
        i = rnd.choice(live)
        try:
            next(agents[i])
        except StopIteration:
            live.remove(i)


BROKEN = ("V stage refilled unfreed", "Q refilled unfreed")


def run(seed, consumers, stages, pingpong, tiles, spec, broken=None):
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
            if broken != "Q refilled unfreed":
                yield from wait(bar_q_empty, (j & 1) ^ 1)
            bar_q.arrive_expect_tx(1)
            copy("q", j, bar_q)
            for t in range(n_tiles):
                u = it + t
                s, phase = u % stages, (u // stages) & 1
                yield from wait(empty_k[s], phase ^ 1)
                full_k[s].arrive_expect_tx(1)
                copy(("k", s), u, full_k[s])
                if broken != "V stage refilled unfreed":
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


def trial(seed, broken=None):
    """One run with a configuration drawn from the seed; the failure as text, or None."""
    rnd = random.Random(seed * 7 + 1)
    consumers, stages, pingpong = rnd.choice([2, 3]), rnd.choice([2, 3, 4]), rnd.choice([0, 1])
    tiles = [rnd.choice([0, 1, 2, 3, 5, 8]) for _ in range(rnd.randint(1, 6))]
    spec = rnd.choice([0, 1])
    try:
        run(seed, consumers, stages, pingpong, tiles, spec, broken)
        return None
    except AssertionError as e:
        return (f"{consumers} consumers, {stages} stages, ping-pong {pingpong}, speculative max {spec}, "
                f"K/V tiles per work tile {tiles}: {e}")


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    for seed in range(runs):
        failure = trial(seed)
        if failure:
            print(f"FAIL seed {seed}: {failure}")
            return 1
    # the model can fail: each broken protocol is caught within a few hundred runs
    for broken in BROKEN:
        if not any(trial(seed, broken) for seed in range(300)):
            print(f"FAIL: the model never catches the broken protocol: {broken}")
            return 1
    print(f"ok: {runs} random interleavings of the persistent warp-specialized protocol; "
          f"{len(BROKEN)} broken protocols caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
