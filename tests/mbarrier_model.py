"""The mbarrier of the warp-specialized kernels' protocol models (fa3_ws_protocol.py,
decode_wgi_protocol.py): arrivals, expected bytes, phases and parity waits."""


class MBarrier:
    """mbarrier: completes a phase when `count` arrivals and all expected bytes are in."""

    def __init__(self, count):
        self.count, self.arrivals, self.tx, self.phase = count, 0, 0, 0

    def arrive(self, n=1):
        self.arrivals += n
        assert self.arrivals <= self.count, "more arrivals than the barrier's count in one phase"
        self._maybe_complete()

    def arrive_expect_tx(self, n_bytes):
        self.tx += n_bytes
        self.arrive()

    def complete_tx(self, n_bytes):
        self.tx -= n_bytes
        assert self.tx >= 0, "bytes completed before the producer expected them"
        self._maybe_complete()

    def _maybe_complete(self):
        if self.arrivals == self.count and self.tx == 0:
            self.arrivals, self.phase = 0, self.phase + 1

    def parity_done(self, parity):  # mbarrier.try_wait.parity
        return (self.phase & 1) != parity
