#!/usr/bin/env python3
"""decode_wgi_protocol.py [RUNS] — a model of the synchronization of templates/decode.cu's .wgi
and .wgi3 kernels with bf16 Q and an FP8 KV cache (DEC_WG_K8), run under random interleavings;
no GPU needed.

What it models, as dec_wg_widen and the .wg kernel's consumer loop do it: STAGES staging slots,
each holding one tile's FP8 K and V as TMA lands them (a "staged" mbarrier, one arrival and the
expected bytes); a ring of RING f16 V tiles with a full and an empty mbarrier each; tile t in slot
t % STAGES and ring stage t % RING. The widening side fills the ring in tile order: .wgi has two
widening warpgroups taking the tiles in turn (each widens a whole tile, meets at its named barrier
and arrives once: full counts 1); .wgi3 has one widening warpgroup whose four warps each widen a
quarter of every tile and arrive themselves (full counts 4), free to drift apart. KSPLIT consumer
warpgroups (2 or 3) take tile t in turn t % KSPLIT; each of their four warps waits for the slot,
reads K from the slot, then waits for the ring stage (step 26; before it, for both at once), reads
V from the ring and, under that P V, counts itself on the slot's count (the fourth warp of the
tile refills the slot with tile t + STAGES: step 24), then arrives on the empty barrier. The
first widener thread stages the first STAGES tiles. Copies land at random later times.

What it checks: no deadlock (every live agent waiting on a barrier no one can complete, no copy in
flight); every read sees the tile it expects (each quarter of a ring stage,
each slot); no copy is issued into, and no copy lands in, a slot still being read, and no widener
writes a ring stage a consumer still reads; no mbarrier gets more arrivals than its count in one
phase; every mbarrier ends balanced. It checks the protocol, not the CUDA code: a change to the
kernel's barriers belongs here too. Each run gives every agent a speed, a few of them very slow
(a warp a profiler's replay or the scheduler holds back). Rings the template refuses (stages not
one warpgroup's: 2 or 4 for three consumer warpgroups, 3 or 5 for two) fail it (main's
self-check). .wgi3 with 9 slots and a ring of 4 deadlocked in it when the warpgroup's first thread
waited on the ring stage's empty barrier before the refill (steps 21-23); that form is kept as
REFILL_WAIT's protocol, which the model must still catch.
"""
import random
import sys

from mbarrier_model import MBarrier

BLOCKED = "blocked"  # what an agent yields while its wait is not satisfied


def run(seed, ksplit, stages, ring, n_tiles, refill_wait=False, v_late=True):
    """One CTA of n_tiles tiles; raises AssertionError on a protocol violation. refill_wait: the
    refill of steps 21-23 (the first thread waits for its warpgroup's empty phase at the tile's end)
    in place of step 24's count. v_late: the consumer waits for the widened V only before P V (step
    26), else before Q K^T (steps 21-25)."""
    rnd = random.Random(seed)
    wideners = 2 if ksplit == 2 else 1
    per_warp = ksplit == 3  # .wgi3: each widening warp arrives on full itself
    staged = [MBarrier(1) for _ in range(stages)]
    full = [MBarrier(4 if per_warp else 1) for _ in range(ring)]
    empty = [MBarrier(4) for _ in range(ring)]
    holds, readers, in_flight = {}, {}, []
    count = [0] * stages  # the slots' counts of warps past Q K^T (atom.shared.add)

    def read(buf, who, tag):
        assert holds.get(buf) == tag, f"{who} reads {buf} holding {holds.get(buf)}, wants tile {tag}"
        readers.setdefault(buf, set()).add(who)

    def done_reading(buf, who):
        readers[buf].discard(who)

    def write(buf, who, tag):  # a widener's st.shared into a ring stage
        assert not readers.get(buf), f"{who} writes {buf} while {readers[buf]} read it"
        holds[buf] = tag

    def stage_in(t):  # dec_wg_stage_in: tile t's FP8 K and V into slot t % STAGES
        s = t % stages
        for half in ("k", "v"):
            assert not readers.get((half, s)), f"copy of tile {t} into slot {s} while {readers[(half, s)]} read it"
        staged[s].arrive_expect_tx(2)
        in_flight.append((("k", s), t, staged[s]))
        in_flight.append((("v", s), t, staged[s]))

    def wait(bar, parity):
        while not bar.parity_done(parity):
            yield BLOCKED

    def widener(wi, quarter):  # dec_wg_widen: a widening warpgroup, or (.wgi3) one of its warps
        me = f"widener {wi}" + (f" warp {quarter}" if quarter is not None else "")
        if quarter in (None, 0):
            for t in range(min(stages, n_tiles)):
                if t % wideners == wi:
                    stage_in(t)
        for t in range(wi, n_tiles, wideners):
            s, r = t % stages, t % ring
            yield from wait(staged[s], (t // stages) & 1)
            yield from wait(empty[r], ((t // ring) & 1) ^ 1)
            read(("v", s), me, t)
            yield
            for q in range(4) if quarter is None else [quarter]:  # a whole tile, or this warp's quarter
                write(("ring", r, q), me, t)
            done_reading(("v", s), me)
            yield
            full[r].arrive()  # after the proxy fence (and .wgi's named barrier of the 128)

    def consumer_warp(c, w):  # the consumer loop of one warp of warpgroup c
        me = f"consumer {c} warp {w}"
        for t in range(c, n_tiles, ksplit):
            s, r = t % stages, t % ring
            if not v_late:
                yield from wait(full[r], (t // ring) & 1)
            yield from wait(staged[s], (t // stages) & 1)
            read(("k", s), me, t)  # Q K^T against the staged K
            yield
            done_reading(("k", s), me)
            if v_late:
                yield from wait(full[r], (t // ring) & 1)
            for q in range(4):
                read(("ring", r, q), me, t)  # P V against the widened V
            count[s] += 1  # under P V
            if not refill_wait and count[s] % 4 == 0 and t + stages < n_tiles:  # the fourth warp refills
                stage_in(t + stages)
            yield
            for q in range(4):
                done_reading(("ring", r, q), me)
            empty[r].arrive()
            if refill_wait and w == 0 and t + stages < n_tiles:  # steps 21-23: the first thread refills
                yield from wait(empty[r], (t // ring) & 1)
                stage_in(t + stages)

    agents = [widener(wi, q) for wi in range(wideners) for q in (range(4) if per_warp else [None])]
    agents += [consumer_warp(c, w) for c in range(ksplit) for w in range(4)]
    live = list(range(len(agents)))
    # Some warps run far slower than others (a scheduler's whim, a profiler's replay): per run,
    # each agent gets a weight, a few of them tiny.
    weight = [rnd.choice([1, 1, 1, 1, 0.01, 0.001]) for _ in agents]
    blocked = set()  # agents whose last step changed nothing and ended in a wait, since the last change
    bars = staged + full + empty

    def state():
        return [(b.phase, b.arrivals, b.tx) for b in bars], len(in_flight)

    while live or in_flight:
        if in_flight and (not live or rnd.random() < 0.3):
            buf, tag, bar = in_flight.pop(rnd.randrange(len(in_flight)))
            assert not readers.get(buf), f"a copy lands in {buf} while {readers[buf]} read it"
            holds[buf] = tag
            bar.complete_tx(1)
            blocked.clear()
            continue
        ready = [j for j in live if j not in blocked]  # a blocked agent's poll would fail again
        if not ready:
            assert in_flight, f"deadlock: agents {sorted(blocked)} all wait"
            continue
        i = rnd.choices(ready, weights=[weight[j] for j in ready])[0]
        before = state()
        try:
            if next(agents[i]) is BLOCKED and state() == before:
                blocked.add(i)
            else:
                blocked.clear()
        except StopIteration:
            live.remove(i)
            blocked.clear()
    for bar in bars:
        assert bar.arrivals == 0 and bar.tx == 0, "an mbarrier ends with a phase half done"


# (ksplit, stages, ring) as templates/decode.cu sizes them (DEC_WG_RING)
LISTED = [(2, 4, 4), (2, 6, 4), (2, 8, 4), (3, 6, 6), (3, 9, 3)]
# protocols the template's static_asserts refuse, which the model must catch
BROKEN = [(3, 9, 2), (2, 6, 3), (2, 5, 5)]
# (3, 9, 4) was listed in step 22, with the refill of steps 21-23: with warps of unequal speed it
# deadlocks (a consumer's first thread, late to its refill wait, sees two phases of a ring stage
# the next warpgroup uses)
REFILL_WAIT = [(3, 9, 4)]


def trial(config, seed, refill_wait=False, v_late=True):
    rnd = random.Random(seed * 7 + 1)
    n_tiles = rnd.choice([0, 1, 2, 3, 5, 8, 13, 20, 33])
    try:
        run(seed, *config, n_tiles, refill_wait, v_late)
        return None
    except AssertionError as e:
        order = "V waited before P V" if v_late else "V waited before Q K^T"
        return f"{config[0]} consumer warpgroups, {config[1]} slots, ring {config[2]}, {order}, {n_tiles} tiles: {e}"


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for seed in range(runs):
        config = LISTED[seed % len(LISTED)]
        failure = trial(config, seed, v_late=(seed // len(LISTED)) % 2 == 0)  # both orders
        if failure:
            print(f"FAIL seed {seed}: {failure}")
            return 1
    # the model can fail: each broken protocol is caught within a few hundred runs
    for config, refill_wait in [(c, False) for c in BROKEN] + [(c, True) for c in REFILL_WAIT]:
        if not any(trial(config, seed, refill_wait, v_late=seed % 2 == 0) for seed in range(300)):
            print(f"FAIL: the model never catches the broken protocol {config}" +
                  (" with the refill wait" if refill_wait else ""))
            return 1
    n = len(BROKEN) + len(REFILL_WAIT)
    print(f"ok: {runs} random interleavings of the .wgi/.wgi3 K8 protocol; {n} broken ones caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
