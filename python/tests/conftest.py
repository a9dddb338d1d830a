"""GPU detection for the tests: tests marked gpu skip unless JAX sees a CUDA device (JAX tests)
or torch.cuda is available (torch tests)."""

import pytest


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
