"""attntune from Python: tuned fused attention for JAX and PyTorch.

    import attntune.jax      # attntune.jax.dot_product_attention(q, k, v, is_causal=True)
    import attntune.torch    # attntune.torch.scaled_dot_product_attention(q, k, v)
    attntune.plan_info(q, k) # which implementation a shape gets, and why

Importing attntune needs no GPU; running attention does. The tuning cache read is the ``db``
argument, else $ATTNTUNE_DB, else none (the generator's defaults, cuDNN, the naive kernels).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from . import _common, _lib
from ._lib import AttntuneError, UnsupportedArgumentError

__all__ = ["AttntuneError", "UnsupportedArgumentError", "PlanInfo", "plan_info", "clear_plans",
           "cached_plans", "version", "__version__"]


def version() -> str:
    """The version of the bundled libattntune."""
    return _lib.core.at_version().decode()


__version__ = version()


@dataclass(frozen=True)
class PlanInfo:
    """What at_plan_describe says about the plan of a shape."""

    shape: str  # the shape key, "b4.t1024.s1024.hq8.hkv8.d64.bf16.causal"
    impl: str  # a variant key, "cudnn" or "naive"
    choice: str  # "exact", "nearest", "default", "cudnn", "naive" or "forced"
    reason: str  # which steps of the lookup chain applied and which did not
    tuned_shape: str  # the cache row used, else ""
    tuned_ms: float  # measured on that row; nan when unknown
    cudnn_ms: float
    compiled: bool  # this plan ran NVRTC (no cubin in the cache)
    create_ms: float

    def __str__(self) -> str:
        return f"{self.shape}: {self.impl} ({self.choice}) - {self.reason}"


def _dims(x: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in (x.shape if hasattr(x, "shape") else x))


def plan_info(query: Any, key: Any, value: Any = None, *, dtype: Any = None, is_causal: bool = False,
              scale: float | None = None, implementation: str | None = None, db: str | None = None,
              device: int = 0, layout: str = "BTNH", causal_alignment: str = "top_left") -> PlanInfo:
    """Which implementation attention on these shapes gets on GPU ``device``, and why.

    query, key (and value) are arrays or shapes: (B, T, N, H) for layout "BTNH" (JAX, the
    default) or (B, N, T, H) for "BNTH" (torch SDPA, contiguous). The dtype is the query's unless
    given. The plan is the one the JAX and PyTorch calls use for the same arguments (it is created
    and cached here if it does not exist yet). Needs a GPU.
    """
    q, k = _dims(query), _dims(key)
    v = _dims(value) if value is not None else k
    if layout not in ("BTNH", "BNTH"):
        raise ValueError(f"attntune: layout '{layout}' unknown (expected BTNH or BNTH)")
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise ValueError(f"attntune: query, key and value must be 4-D, got {q}, {k}, {v}")
    if layout == "BNTH":
        q, k, v = ((s[0], s[2], s[1], s[3]) for s in (q, k, v))
    if dtype is None:
        if not hasattr(query, "dtype"):
            raise ValueError("attntune: pass dtype= when query is a shape")
        dtype = query.dtype
    shape = _common.make_shape(batch=q[0], q_len=q[1], kv_len=k[1], q_heads=q[2], kv_heads=k[2],
                               head_dim=q[3], v_head_dim=v[3], dtype=_common.dtype_name(dtype),
                               mask=_common.mask_code(is_causal, causal_alignment), scale=scale)
    lay = _common.bshd_layout(shape) if layout == "BTNH" else _common.bnth_layout(shape)
    plan = ctypes.c_void_p()
    _lib.check_py(_lib.py.atpy_plan_get(device, shape, lay, _lib.encode(implementation),
                                        _lib.encode(_common.resolve_db(db)), ctypes.byref(plan)))
    return describe(plan, shape)


def describe(plan: ctypes.c_void_p, shape: _lib.Shape) -> PlanInfo:
    info = _lib.PlanInfoC()
    _lib.check_core(_lib.core.at_plan_describe(plan, ctypes.byref(info)), "at_plan_describe")
    return PlanInfo(shape=_common.shape_key(shape), impl=info.impl.decode(),
                    choice=_lib.core.at_choice_name(info.choice).decode(), reason=info.reason.decode(),
                    tuned_shape=info.tuned_shape.decode(), tuned_ms=info.tuned_ms,
                    cudnn_ms=info.cudnn_ms, compiled=bool(info.compiled), create_ms=info.create_ms)


def cached_plans() -> int:
    """How many plans the process holds (one per device, cache file, shape, layout and impl)."""
    return _lib.py.atpy_cache_size()


def clear_plans() -> None:
    """Destroy every cached plan and context. No attention call may be in flight."""
    from . import _plans
    _plans.forget()
    _lib.py.atpy_cache_clear()

