"""GPU detection for the tests: tests marked gpu skip unless JAX sees a CUDA device (JAX tests)
or torch.cuda is available (torch tests). And the seed of their random inputs: fresh each run,
printed in pytest's header, and taken from ATTNTUNE_TEST_SEED when set, so a failure can be
replayed (as the C tests do)."""

import os
import secrets
import zlib

import pytest


def _choose_seed():
    text = os.environ.get("ATTNTUNE_TEST_SEED", "")
    if not text:
        return secrets.randbits(63), "ATTNTUNE_TEST_SEED={} replays it"
    try:
        seed = int(text, 0)
    except ValueError:
        seed = -1
    if not 0 <= seed < 2**64:
        raise pytest.UsageError(f"ATTNTUNE_TEST_SEED={text!r} is not an unsigned 64-bit integer")
    return seed, "from ATTNTUNE_TEST_SEED"


SEED, _SEED_NOTE = _choose_seed()


def pytest_report_header(config):
    return f"attntune test seed {SEED} ({_SEED_NOTE.format(SEED)})"


def seed_for(case) -> int:
    """The seed of one case's inputs: the run's seed mixed with a stable text of the case (not
    hash(), which Python salts per process), so a replayed seed draws the same inputs."""
    return (SEED ^ zlib.crc32(repr(case).encode())) % 2**63


def jax_gpu():
    try:
        import jax
        return jax.devices("gpu")[0]
    except Exception:
        return None


def torch_gpu():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


needs_jax_gpu = pytest.mark.skipif(jax_gpu() is None, reason="no GPU visible to JAX")
needs_torch_gpu = pytest.mark.skipif(not torch_gpu(), reason="no GPU visible to torch")
