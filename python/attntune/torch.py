"""attntune for PyTorch: ``scaled_dot_product_attention`` with torch SDPA's layout (B, N, T, H),
as the custom op ``torch.ops.attntune.sdpa`` (a fake implementation for torch.compile / meta
tensors; runs on the current CUDA stream); and the serving layouts (include/attntune.h, "Serving
layouts"): ``varlen_attention`` for sequences packed with cu_seqlens (FlashAttention's varlen
layout, ``torch.ops.attntune.varlen``) and ``paged_attention`` for decode over a paged KV cache
(vLLM's layout, ``torch.ops.attntune.paged``).

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

__all__ = ["scaled_dot_product_attention", "sdpa", "varlen_attention", "paged_attention"]

_FP8 = ("e4m3", "e5m2")


def _out_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.bfloat16 if _common.dtype_name(dtype) in _FP8 else dtype


def _empty_out(query: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    b, n, t, _ = query.shape
    return query.new_empty((b, t, n, value.shape[-1]), dtype=_out_dtype(query.dtype)).transpose(1, 2)


def _usable(x: torch.Tensor) -> torch.Tensor:
    """x itself when attntune can read it in place (head dim contiguous, 16-byte aligned rows: the
    kernels load 16 bytes at a time), else a contiguous copy."""
    size = x.element_size()
    ok = x.stride(-1) == 1 and x.data_ptr() % 16 == 0 and all(
        (x.stride(i) * size) % 16 == 0 or x.shape[i] == 1 for i in range(x.dim() - 1))
    return x if ok else x.contiguous()


def _device_index(x: torch.Tensor) -> int:
    return x.device.index if x.device.index is not None else torch.cuda.current_device()


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
    device = _device_index(q)
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



# ---- serving layouts: packed (varlen) sequences and a paged KV cache -------------------------

def _metadata(x: torch.Tensor, name: str, device: torch.device, shape: tuple[int, ...]) -> torch.Tensor:
    """An int32 CUDA tensor of shape on device, contiguous, or a ValueError naming it."""
    if not isinstance(x, torch.Tensor) or x.dtype != torch.int32:
        raise ValueError(f"attntune: {name} must be an int32 tensor, got "
                         f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
    if tuple(x.shape) != shape:
        raise ValueError(f"attntune: {name} must have shape {shape}, got {tuple(x.shape)}")
    if x.device != device:
        raise ValueError(f"attntune: {name} must be on {device} with the query, got {x.device}")
    return x.contiguous()


def _serving_plan(device: int, shape: _lib.Shape, q_layout: str, kv_layout: str, page_size: int,
                  max_pages: int, strides: Layout, impl: str, db: str) -> ctypes.c_void_p:
    key = ("serving", device, _common.shape_key(shape), shape.kv_dtype, q_layout, kv_layout, page_size,
           max_pages, tuple((st.batch, st.seq, st.head) for st in (strides.q, strides.k, strides.v, strides.o)),
           impl, db)
    plan = _plans._PLANS.get(key)
    if plan is None:
        layout = _lib.ServingLayout(struct_size=ctypes.sizeof(_lib.ServingLayout),
                                    q_layout=_lib.SEQ_LAYOUTS[q_layout], kv_layout=_lib.SEQ_LAYOUTS[kv_layout],
                                    page_size=page_size, max_pages_per_seq=max_pages, strides=strides)
        plan = ctypes.c_void_p()
        _lib.check_py(_lib.py.atpy_plan_get_serving(device, ctypes.byref(shape), ctypes.byref(layout),
                                                    _lib.encode(impl), _lib.encode(db), ctypes.byref(plan)))
        _plans._PLANS[key] = plan
    return plan


def _one_cuda_device(*xs: torch.Tensor) -> None:
    if not (xs[0].is_cuda and all(x.device == xs[0].device for x in xs)):
        raise ValueError("attntune: the tensors and the metadata must be on one CUDA device, got "
                         + ", ".join(str(x.device) for x in xs))


def _run_serving(plan: ctypes.c_void_p, t: _lib.ServingTensors, fp8: Any, device: torch.device,
                 check: bool) -> None:
    current = torch.cuda.current_stream(device)
    if check:
        # at_serving_check copies the metadata to the host: it must be written first.
        current.synchronize()
        rc = _lib.core.at_serving_check(plan, ctypes.byref(t))
        if rc != 0:
            message = _lib.core.at_last_error().decode()
            if _lib.status_name(rc) == "AT_ERR_INVALID":
                raise ValueError(f"attntune: {message}")
            raise _lib.AttntuneError(_lib.status_name(rc), message)
    _lib.check_py(_lib.py.atpy_plan_run_serving(plan, ctypes.byref(t), fp8, current.cuda_stream))


@torch.library.custom_op("attntune::varlen", mutates_args=())
def varlen(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seqlens_q: torch.Tensor,
           cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, mask: int, scale: float,
           impl: str, db: str, check: bool) -> torch.Tensor:
    """The op: query (total_q, N, H), key/value (total_k, K, H) packed, cu_seqlens int32 (B + 1)
    on the query's device; the result (total_q, N, H)."""
    _one_cuda_device(query, key, value, cu_seqlens_q, cu_seqlens_k)
    q, k, v = _usable(query), _usable(key), _usable(value)
    total_q, n, h = q.shape
    total_k, nk = k.shape[0], k.shape[1]
    batch = cu_seqlens_q.shape[0] - 1
    out = q.new_empty((total_q, n, h))
    shape = _common.make_shape(batch=batch, q_len=max_seqlen_q, kv_len=max_seqlen_k, q_heads=n, kv_heads=nk,
                               head_dim=h, dtype=_common.dtype_name(q.dtype), mask=mask, scale=scale or None)
    packed = lambda x: _lib.Strides(batch=0, seq=x.stride(0), head=x.stride(1))  # noqa: E731
    strides = Layout(q=packed(q), k=packed(k), v=packed(v), o=packed(out))
    plan = _serving_plan(_device_index(q), shape, "ragged", "ragged", 0, 0, strides, impl, db)
    t = _lib.ServingTensors(struct_size=ctypes.sizeof(_lib.ServingTensors), q=q.data_ptr(), k=k.data_ptr(),
                            v=v.data_ptr(), o=out.data_ptr(), lse=None, q_stride=strides.q, k_stride=strides.k,
                            v_stride=strides.v, o_stride=strides.o, cu_seqlens_q=cu_seqlens_q.data_ptr(),
                            cu_seqlens_kv=cu_seqlens_k.data_ptr(), total_q=total_q, total_kv=total_k)
    _run_serving(plan, t, None, q.device, check)
    return out


@varlen.register_fake
def _varlen_fake(query, key, value, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, mask, scale,
                 impl, db, check):
    return query.new_empty((query.shape[0], query.shape[1], value.shape[2]))


def varlen_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    *,
    is_causal: bool = False,
    causal_alignment: str = "top_left",
    scale: Optional[float] = None,
    implementation: Optional[str] = None,
    db: Optional[str | os.PathLike] = None,
    check_metadata: bool = False,
) -> torch.Tensor:
    """Attention over B sequences of different lengths packed along the first axis (FlashAttention's
    varlen layout): query (total_q, N, H), key and value (total_k, K, H), N a multiple of K;
    ``cu_seqlens_q``/``cu_seqlens_k`` int32 (B + 1) on the query's device, sequence b being rows
    cu_seqlens[b] .. cu_seqlens[b + 1] - 1; ``max_seqlen_q``/``max_seqlen_k`` the longest lengths
    (they size the plan: a longer sequence is cut to them). Masks apply per sequence;
    ``causal_alignment="bottom_right"`` aligns each sequence's last query with its last key
    (chunked prefill). float16 or bfloat16; the result is (total_q, N, H) in the input dtype. On
    sm_90a the plan runs fa3's ragged kernel, elsewhere fa2's; a tuned cache (``db``) has no rows
    for ragged tensors yet. The kernels never read outside the tensors whatever the offsets say;
    ``check_metadata=True`` also checks them on the host first (a stream sync and a copy) and
    raises ValueError naming the first bad entry (at_serving_check)."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"attntune: {name} must be a (total, heads, head_dim) tensor, got {type(x).__name__}")
    _common.check_packed(query=tuple(query.shape), key=tuple(key.shape), value=tuple(value.shape),
                         dtypes=(query.dtype, key.dtype, value.dtype))
    if cu_seqlens_q.dim() != 1 or cu_seqlens_q.shape[0] < 2:
        raise ValueError(f"attntune: cu_seqlens_q must be (B + 1,) with B >= 1, got {tuple(cu_seqlens_q.shape)}")
    batch = cu_seqlens_q.shape[0] - 1
    cu_q = _metadata(cu_seqlens_q, "cu_seqlens_q", query.device, (batch + 1,))
    cu_k = _metadata(cu_seqlens_k, "cu_seqlens_k", query.device, (batch + 1,))
    max_q = _common.positive_length("max_seqlen_q", max_seqlen_q)
    max_k = _common.positive_length("max_seqlen_k", max_seqlen_k)
    mask = _common.mask_code(is_causal, causal_alignment)
    if not torch.compiler.is_compiling():  # no ctypes under Dynamo; the op checks again when it runs
        _common.make_shape(batch=batch, q_len=max_q, kv_len=max_k, q_heads=query.shape[1],
                           kv_heads=key.shape[1], head_dim=query.shape[2], dtype=_common.dtype_name(query.dtype),
                           mask=mask, scale=scale)
    return varlen(query, key, value, cu_q, cu_k, max_q, max_k, mask, 0.0 if scale is None else float(scale),
                  implementation or "", _common.resolve_db(db), bool(check_metadata))


@torch.library.custom_op("attntune::paged", mutates_args=())
def paged(query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_table: torch.Tensor,
          seqlens_k: torch.Tensor, descale_k: Optional[torch.Tensor], descale_v: Optional[torch.Tensor],
          max_seqlen_k: int, mask: int, scale: float, impl: str, db: str, check: bool) -> torch.Tensor:
    """The op: query (B, T, N, H), caches (num_pages, page_size, K, H), block_table int32
    (B, max_pages), seqlens_k int32 (B,); the result (B, T, N, H)."""
    _one_cuda_device(query, key_cache, value_cache, block_table, seqlens_k)
    q = _usable(query)
    kc, vc = _usable(key_cache), _usable(value_cache)
    b, t, n, h = q.shape
    num_pages, page_size, nk = kc.shape[0], kc.shape[1], kc.shape[2]
    out = q.new_empty((b, t, n, h))
    shape = _common.make_shape(batch=b, q_len=t, kv_len=max_seqlen_k, q_heads=n, kv_heads=nk, head_dim=h,
                               dtype=_common.dtype_name(q.dtype), mask=mask, scale=scale or None)
    fp8, keep = None, []
    if _common.is_fp8(kc.dtype):
        shape.kv_dtype = _lib.DTYPES[_common.dtype_name(kc.dtype)]
        (dk, pk), (dv, pv) = (_descale_ptr(d, name, q.device) for d, name in (
            (descale_k, "descale_k"), (descale_v, "descale_v")))
        keep = [dk, dv]
        fp8 = ctypes.byref(Fp8Args(descale_q=None, descale_k=pk, descale_v=pv))
    padded = lambda x: _lib.Strides(batch=x.stride(0), seq=x.stride(1), head=x.stride(2))  # noqa: E731
    strides = Layout(q=padded(q), k=padded(kc), v=padded(vc), o=padded(out))
    plan = _serving_plan(_device_index(q), shape, "padded", "paged", page_size, block_table.shape[1], strides,
                         impl, db)
    st = _lib.ServingTensors(struct_size=ctypes.sizeof(_lib.ServingTensors), q=q.data_ptr(), k=kc.data_ptr(),
                             v=vc.data_ptr(), o=out.data_ptr(), lse=None, q_stride=strides.q, k_stride=strides.k,
                             v_stride=strides.v, o_stride=strides.o, block_table=block_table.data_ptr(),
                             seqlens_kv=seqlens_k.data_ptr(), num_pages=num_pages)
    _run_serving(plan, st, fp8, q.device, check)
    del keep  # the descales' copies, freed to this stream's caching allocator after the kernel
    return out


@paged.register_fake
def _paged_fake(query, key_cache, value_cache, block_table, seqlens_k, descale_k, descale_v, max_seqlen_k,
                mask, scale, impl, db, check):
    return query.new_empty(query.shape)


def paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_table: torch.Tensor,
    seqlens_k: torch.Tensor,
    max_seqlen_k: int,
    *,
    is_causal: bool = False,
    scale: Optional[float] = None,
    descale_k: Optional[torch.Tensor] = None,
    descale_v: Optional[torch.Tensor] = None,
    implementation: Optional[str] = None,
    db: Optional[str | os.PathLike] = None,
    check_metadata: bool = False,
) -> torch.Tensor:
    """Attention over a paged KV cache (vLLM's layout): query (B, T, N, H), T new tokens per
    sequence (1 to 16 for a decode step, more for a prefill chunk); key_cache and value_cache (num_pages, page_size, K, H) with page_size
    1, 16, 32, 64, 128 or 256; ``block_table`` int32 (B, max_pages), sequence b's tokens
    p * page_size .. (p + 1) * page_size - 1 in page block_table[b, p]; ``seqlens_k`` int32 (B,),
    each at most ``max_seqlen_k`` (which sizes the plan). ``is_causal`` masks bottom-right (query
    row i of T sees keys up to S_b - T + i). float16/bfloat16 query; the caches in its dtype or
    float8_e4m3fn/e5m2 (an FP8 KV cache) with ``descale_k``/``descale_v`` (float32 one-element
    tensors). Runs the decode family's paged kernels for T of 1 to 16, the paged prefill kernels (fa3's on sm_90a, fa2's elsewhere) for longer T with the caches in the query's dtype (prefill into a paged cache; an FP8 cache with longer T runs the naive kernels); the result is (B, T, N, H). No kernel reads
    outside the pools whatever the table holds; ``check_metadata=True`` checks the table and the
    lengths on the host first and raises ValueError naming the first bad entry."""
    if not isinstance(query, torch.Tensor) or query.dim() != 4:
        raise ValueError("attntune: query must be (B, T, N, H)")
    for name, x in (("key_cache", key_cache), ("value_cache", value_cache)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            raise ValueError(f"attntune: {name} must be (num_pages, page_size, K, H)")
    if key_cache.shape != value_cache.shape or key_cache.dtype != value_cache.dtype:
        raise ValueError(f"attntune: key_cache {tuple(key_cache.shape)} {key_cache.dtype} and value_cache "
                         f"{tuple(value_cache.shape)} {value_cache.dtype} must have one shape and dtype")
    if query.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"attntune: paged_attention takes a float16 or bfloat16 query, got {query.dtype}")
    fp8_cache = _common.is_fp8(key_cache.dtype)
    if key_cache.dtype != query.dtype and not fp8_cache:
        raise TypeError(f"attntune: the caches must be in the query's dtype ({query.dtype}) or FP8, got "
                        f"{key_cache.dtype}")
    if not fp8_cache and (descale_k is not None or descale_v is not None):
        raise ValueError("attntune: descale_k/descale_v only apply to an FP8 KV cache")
    b, t, n, h = query.shape
    max_k = _common.positive_length("max_seqlen_k", max_seqlen_k)
    if block_table.dim() != 2:
        raise ValueError(f"attntune: block_table must be (B, max_pages), got {tuple(block_table.shape)}")
    table = _metadata(block_table, "block_table", query.device, (b, block_table.shape[1]))
    _common.check_paged(page_size=key_cache.shape[1], cache_head_dim=key_cache.shape[3], head_dim=h,
                        max_pages=table.shape[1], max_seqlen_k=max_k)
    lengths = _metadata(seqlens_k, "seqlens_k", query.device, (b,))
    mask = _common.mask_code(is_causal, "bottom_right")
    if not torch.compiler.is_compiling():
        _common.make_shape(batch=b, q_len=t, kv_len=max_k, q_heads=n, kv_heads=key_cache.shape[2], head_dim=h,
                           dtype=_common.dtype_name(query.dtype), mask=mask, scale=scale)
    return paged(query, key_cache, value_cache, table, lengths, descale_k, descale_v, max_k, mask,
                 0.0 if scale is None else float(scale), implementation or "", _common.resolve_db(db),
                 bool(check_metadata))
