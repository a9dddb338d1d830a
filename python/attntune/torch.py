"""attntune for PyTorch: ``scaled_dot_product_attention`` with torch SDPA's layout (B, N, T, H),
as the custom op ``torch.ops.attntune.sdpa`` (a fake implementation for torch.compile / meta
tensors; runs on the current CUDA stream).

    import attntune.torch
    out = attntune.torch.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

Inputs keep their strides when the head dim is contiguous and rows are 16-byte aligned (other
layouts are copied); the result is (B, N, T, H) as a view of a (B, T, N, H) buffer. Forward only.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Optional

import torch

from . import _common, _lib, _plans
from ._lib import Fp8Args, Layout, Tensors

__all__ = ["scaled_dot_product_attention", "sdpa"]

_FP8 = ("e4m3", "e5m2")


def _out_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.bfloat16 if _common.dtype_name(dtype) in _FP8 else dtype


def _empty_out(query: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    b, n, t, _ = query.shape
    return query.new_empty((b, t, n, value.shape[-1]), dtype=_out_dtype(query.dtype)).transpose(1, 2)


def _usable(x: torch.Tensor) -> torch.Tensor:
    """x itself when attntune can read it in place (head dim contiguous, 16-byte aligned rows),
    else a contiguous copy."""
    size = x.element_size()
    ok = x.stride(-1) == 1 and x.data_ptr() % 16 == 0 and all(
        (x.stride(i) * size) % 16 == 0 or x.shape[i] == 1 for i in range(3))
    return x if ok else x.contiguous()


def _strides(x: torch.Tensor) -> _lib.Strides:
    # (B, N, T, H) tensor -> at_strides {batch, seq, head}
    return _lib.Strides(batch=x.stride(0), seq=x.stride(2), head=x.stride(1))


def _descale_ptr(d: Optional[torch.Tensor], name: str, device: torch.device) -> tuple[Any, int]:
    if d is None:
        raise ValueError(f"attntune: FP8 inputs need {name} (a float32 CUDA tensor of one element)")
    if d.dtype != torch.float32 or d.numel() != 1 or d.device != device:
        raise ValueError(f"attntune: {name} must be one float32 value on {device}, got {d.dtype} "
                         f"{tuple(d.shape)} on {d.device}")
    d = d.reshape(1).contiguous()
    return d, d.data_ptr()


@torch.library.custom_op("attntune::sdpa", mutates_args=())
def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
         descale_q: Optional[torch.Tensor], descale_k: Optional[torch.Tensor],
         descale_v: Optional[torch.Tensor], mask: int, scale: float, impl: str,
         db: str) -> torch.Tensor:
    """The op: query (B, N, T, H), key/value (B, K, S, H) on one CUDA device; mask an at_mask
    code, scale 0 for 1/sqrt(H), impl "" for auto, db "" for no tuning cache."""
    if not (query.is_cuda and key.device == query.device and value.device == query.device):
        raise ValueError(f"attntune: query, key and value must be on one CUDA device, got "
                         f"{query.device}, {key.device}, {value.device}")
    q, k, v = _usable(query), _usable(key), _usable(value)
    b, n, t, h = q.shape
    nk, s = k.shape[1], k.shape[2]
    dtype = _common.dtype_name(q.dtype)
    out = _empty_out(q, v)
    device = q.device.index if q.device.index is not None else torch.cuda.current_device()
    cache_key = (device, b, t, s, n, nk, h, dtype, mask, scale, q.stride(), k.stride(), v.stride(),
                 out.stride(), impl, db)
    plan = _plans._PLANS.get(cache_key)
    if plan is None:
        shape = _common.make_shape(batch=b, q_len=t, kv_len=s, q_heads=n, kv_heads=nk, head_dim=h,
                                   dtype=dtype, mask=mask, scale=scale or None)
        layout = Layout(q=_strides(q), k=_strides(k), v=_strides(v), o=_strides(out))
        plan = _plans.get(cache_key, device, shape, layout, impl, db)
    tensors = Tensors(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=out.data_ptr(), lse=None,
                      q_stride=_strides(q), k_stride=_strides(k), v_stride=_strides(v),
                      o_stride=_strides(out))
    fp8 = None
    keep = []
    if dtype in _FP8:
        (dq, pq), (dk, pk), (dv, pv) = (_descale_ptr(d, name, q.device) for d, name in (
            (descale_q, "descale_q"), (descale_k, "descale_k"), (descale_v, "descale_v")))
        keep = [dq, dk, dv]
        fp8 = ctypes.byref(Fp8Args(descale_q=pq, descale_k=pk, descale_v=pv))
    stream = torch.cuda.current_stream(q.device).cuda_stream
    _lib.check_py(_lib.py.atpy_plan_run(plan, ctypes.byref(tensors), fp8, stream))
    del keep  # copies of the descales: freed to the caching allocator of this same stream, so
    # their memory is reused only by work queued after the kernel
    return out


@sdpa.register_fake
def _sdpa_fake(query, key, value, descale_q, descale_k, descale_v, mask, scale, impl, db):
    return _empty_out(query, value)


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: Optional[torch.Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
    *,
    implementation: Optional[str] = None,
    causal_alignment: str = "top_left",
    descale_q: Optional[torch.Tensor] = None,
    descale_k: Optional[torch.Tensor] = None,
    descale_v: Optional[torch.Tensor] = None,
    db: Optional[str | os.PathLike] = None,
) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention through attntune.

    query (B, N, T, H) or (N, T, H), key/value (B, K, S, H); K < N needs enable_gqa=True, as in
    torch. dtypes float16, bfloat16 (float32: naive kernels only), float8_e4m3fn/e5m2 with
    ``descale_q/k/v`` (float32 one-element tensors; the result is bfloat16). attn_mask and
    dropout_p are not supported (UnsupportedArgumentError). ``implementation``, ``db`` and
    ``causal_alignment`` as in attntune.jax.dot_product_attention.
    """
    _common.reject(attn_mask=attn_mask, dropout_p=dropout_p or None)
    unbatched = query.dim() == 3
    if unbatched:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise ValueError(f"attntune: query, key and value must be (B, N, T, H) or (N, T, H), got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if key.shape != value.shape:
        raise ValueError(f"attntune: key {tuple(key.shape)} and value {tuple(value.shape)} must have "
                         "one shape (attntune needs the value head dim equal to the key's)")
    if query.shape[0] != key.shape[0] or query.shape[3] != key.shape[3]:
        raise ValueError(f"attntune: query {tuple(query.shape)} and key {tuple(key.shape)} must agree "
                         "in batch and head dim")
    if key.shape[1] != query.shape[1] and not enable_gqa:
        raise ValueError(f"attntune: {query.shape[1]} query heads and {key.shape[1]} key/value heads "
                         "need enable_gqa=True (as in torch SDPA)")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(f"attntune: query, key and value must share one dtype, got {query.dtype}, "
                        f"{key.dtype}, {value.dtype}")
    dtype = _common.dtype_name(query.dtype)
    mask = _common.mask_code(is_causal, causal_alignment)
    if torch.compiler.is_compiling():  # no ctypes under Dynamo; the op checks again when it runs
        _common.check_dims(q_heads=query.shape[1], kv_heads=key.shape[1], head_dim=query.shape[3],
                           scale=scale)
    else:
        _common.make_shape(batch=query.shape[0], q_len=query.shape[2], kv_len=key.shape[2],
                           q_heads=query.shape[1], kv_heads=key.shape[1], head_dim=query.shape[3],
                           dtype=dtype, mask=mask, scale=scale)
    if dtype not in _FP8 and any(d is not None for d in (descale_q, descale_k, descale_v)):
        raise ValueError(f"attntune: descale_q/k/v only apply to FP8 inputs, not {query.dtype}")
    out = sdpa(query, key, value, descale_q, descale_k, descale_v, mask,
               0.0 if scale is None else float(scale), implementation or "", _common.resolve_db(db))
    return out[0] if unbatched else out

