"""attntune for JAX: ``dot_product_attention`` with jax.nn.dot_product_attention's layout and
meaning, run by an XLA FFI custom call on XLA's stream (usable under jax.jit; command-buffer
compatible); ``varlen_attention`` for sequences of different lengths packed along one axis with
cu_seqlens offsets (FlashAttention's varlen layout); ``paged_attention`` for decode over a paged KV
cache (vLLM's layout).

    import attntune.jax
    out = jax.jit(attntune.jax.dot_product_attention)(q, k, v)   # q (B, T, N, H), k/v (B, S, K, H)

The plan for a shape is made on the first execution and reused. Forward only (no gradient).
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import _common, _lib
from ._lib import UnsupportedArgumentError

__all__ = ["dot_product_attention", "varlen_attention", "paged_attention", "TARGET", "TARGET_VARLEN",
           "TARGET_PAGED"]

#: The custom-call target names, as they appear in lowered HLO.
TARGET = "attntune_sdpa"
TARGET_VARLEN = "attntune_varlen"
TARGET_PAGED = "attntune_paged"

_FP8 = ("e4m3", "e5m2")


def _register() -> None:
    traits = _command_buffer_traits()
    kwargs = {"traits": traits} if traits is not None else {}
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(_lib.xla_handler), platform="CUDA", **kwargs)
    jax.ffi.register_ffi_target(TARGET_VARLEN, jax.ffi.pycapsule(_lib.xla_varlen_handler), platform="CUDA",
                                **kwargs)
    jax.ffi.register_ffi_target(TARGET_PAGED, jax.ffi.pycapsule(_lib.xla_paged_handler), platform="CUDA",
                                **kwargs)


def _command_buffer_traits() -> Any:
    try:
        from jaxlib import xla_client
        return xla_client.CustomCallTargetTraits.COMMAND_BUFFER_COMPATIBLE
    except (ImportError, AttributeError):
        return None  # older jaxlib: the handler still answers XLA's metadata query itself


_register()


def _as_4d(x: Any, name: str) -> tuple[Any, bool]:
    if x.ndim == 4:
        return x, False
    if x.ndim == 3:
        return x[None], True
    raise ValueError(f"attntune: {name} must be (B, T, N, H) or (T, N, H), got shape {tuple(x.shape)}")


def _descale(x: Any, name: str) -> Any:
    d = jnp.asarray(x, dtype=jnp.float32)
    if d.size != 1:
        raise ValueError(f"attntune: {name} must be one float32 value, got shape {tuple(d.shape)}")
    return d.reshape(())


def dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    bias: Any = None,
    mask: Any = None,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    query_seq_lengths: Any = None,
    key_value_seq_lengths: Any = None,
    local_window_size: Any = None,
    implementation: str | None = None,
    causal_alignment: str = "top_left",
    descale_q: Any = None,
    descale_k: Any = None,
    descale_v: Any = None,
    db: str | os.PathLike | None = None,
) -> jax.Array:
    """Scaled dot-product attention through attntune, as jax.nn.dot_product_attention computes it.

    query (B, T, N, H), key and value (B, S, K, H) with N % K == 0 (K < N: GQA, K == 1: MQA); the
    batch axis may be left out. dtypes float16, bfloat16 (float32 runs the naive kernels only),
    float8_e4m3fn / float8_e5m2 with ``descale_q/k/v`` (float32 scalars: x = code * descale),
    which give a bfloat16 result. ``scale`` defaults to 1/sqrt(H); ``is_causal`` masks row i to
    keys j <= i (``causal_alignment="bottom_right"``: j <= i + S - T).

    ``implementation``: None or "auto" (tuned result, nearest tuned shape, default kernel, cuDNN,
    naive), "fused", "cudnn", "naive" or a variant key. ``db``: the tuning cache (else
    $ATTNTUNE_DB, else none). bias, mask, query_seq_lengths, key_value_seq_lengths and
    local_window_size are not supported and raise UnsupportedArgumentError.
    """
    _common.reject(bias=bias, mask=mask, query_seq_lengths=query_seq_lengths,
                   key_value_seq_lengths=key_value_seq_lengths, local_window_size=local_window_size)
    if implementation in ("xla", "cudnn_jax"):
        raise UnsupportedArgumentError(
            f"attntune: implementation '{implementation}' is jax.nn's; attntune's are None, 'auto', "
            "'fused', 'cudnn', 'naive' or a variant key")
    query, key, value = jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)
    q, unbatched = _as_4d(query, "query")
    k, k_unbatched = _as_4d(key, "key")
    v, v_unbatched = _as_4d(value, "value")
    if not (unbatched == k_unbatched == v_unbatched):
        raise ValueError("attntune: query, key and value must all have a batch axis or none")
    if k.shape != v.shape:
        raise ValueError(f"attntune: key {tuple(k.shape)} and value {tuple(v.shape)} must have one "
                         "shape (attntune needs the value head dim equal to the key's)")
    if q.shape[0] != k.shape[0]:
        raise ValueError(f"attntune: batch of query ({q.shape[0]}) and key ({k.shape[0]}) differ")
    if q.shape[3] != k.shape[3]:
        raise ValueError(f"attntune: head dim of query ({q.shape[3]}) and key ({k.shape[3]}) differ")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"attntune: query, key and value must share one dtype, got {q.dtype}, "
                        f"{k.dtype}, {v.dtype}")
    dtype = _common.dtype_name(q.dtype)
    shape = _common.make_shape(batch=q.shape[0], q_len=q.shape[1], kv_len=k.shape[1],
                               q_heads=q.shape[2], kv_heads=k.shape[2], head_dim=q.shape[3],
                               dtype=dtype, mask=_common.mask_code(is_causal, causal_alignment),
                               scale=scale)
    descales = {"descale_q": descale_q, "descale_k": descale_k, "descale_v": descale_v}
    operands = [q, k, v]
    if dtype in _FP8:
        missing = [n for n, d in descales.items() if d is None]
        if missing:
            raise ValueError(f"attntune: FP8 inputs need {', '.join(missing)} (float32 scalars)")
        operands += [_descale(d, n) for n, d in descales.items()]
        out_dtype = jnp.bfloat16
    else:
        given = [n for n, d in descales.items() if d is not None]
        if given:
            raise ValueError(f"attntune: {', '.join(given)} only apply to FP8 inputs, not {q.dtype}")
        out_dtype = q.dtype
    call = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct(q.shape, out_dtype),
                            vmap_method="sequential")
    out = call(*operands, mask=np.int32(shape.mask), scale=np.float32(shape.scale),
               impl=implementation or "", db=_common.resolve_db(db))
    return out[0] if unbatched else out


def varlen_attention(
    query: Any,
    key: Any,
    value: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: int,
    max_seqlen_k: int,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    causal_alignment: str = "top_left",
    implementation: str | None = None,
    db: str | os.PathLike | None = None,
) -> jax.Array:
    """Attention over B sequences packed along the first axis: query (total_q, N, H), key and value
    (total_k, K, H), N % K == 0; ``cu_seqlens_q``/``cu_seqlens_k`` int32 (B + 1), sequence b being
    rows cu_seqlens[b] .. cu_seqlens[b + 1] - 1; ``max_seqlen_q``/``max_seqlen_k`` Python ints,
    the longest lengths (they size the plan; a longer sequence is cut to them). Masks apply per
    sequence (``causal_alignment="bottom_right"``: each sequence's last query sees its last key).
    float16 or bfloat16; the result is (total_q, N, H) in the input dtype."""
    query, key, value = jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)
    cu_q, cu_k = jnp.asarray(cu_seqlens_q), jnp.asarray(cu_seqlens_k)
    _common.check_packed(query=query.shape, key=key.shape, value=value.shape,
                         dtypes=(query.dtype, key.dtype, value.dtype))
    for name, x in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
        if x.dtype != jnp.int32 or x.ndim != 1 or x.shape[0] < 2:
            raise ValueError(f"attntune: {name} must be int32 (B + 1,) with B >= 1, got {x.dtype} "
                             f"{tuple(x.shape)}")
    if cu_q.shape != cu_k.shape:
        raise ValueError(f"attntune: cu_seqlens_q {tuple(cu_q.shape)} and cu_seqlens_k {tuple(cu_k.shape)} "
                         "must have one length (B + 1)")
    max_seqlen_q = _common.positive_length("max_seqlen_q", max_seqlen_q)
    max_seqlen_k = _common.positive_length("max_seqlen_k", max_seqlen_k)
    shape = _common.make_shape(batch=cu_q.shape[0] - 1, q_len=max_seqlen_q, kv_len=max_seqlen_k,
                               q_heads=query.shape[1], kv_heads=key.shape[1], head_dim=query.shape[2],
                               dtype=_common.dtype_name(query.dtype),
                               mask=_common.mask_code(is_causal, causal_alignment), scale=scale)
    call = jax.ffi.ffi_call(TARGET_VARLEN, jax.ShapeDtypeStruct(query.shape, query.dtype),
                            vmap_method="sequential")
    return call(query, key, value, cu_q, cu_k, mask=np.int32(shape.mask), scale=np.float32(shape.scale),
                max_q=np.int32(max_seqlen_q), max_k=np.int32(max_seqlen_k), impl=implementation or "",
                db=_common.resolve_db(db))



def paged_attention(
    query: Any,
    key_cache: Any,
    value_cache: Any,
    block_table: Any,
    seqlens_k: Any,
    max_seqlen_k: int,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    descale_k: Any = None,
    descale_v: Any = None,
    implementation: str | None = None,
    db: str | os.PathLike | None = None,
) -> jax.Array:
    """Attention over a paged KV cache: query (B, T, N, H), T new tokens per sequence (1 to 16
    for a decode step, which runs the decode family's paged kernels; more for a prefill chunk,
    the paged prefill kernels (fa3's on sm_90a, fa2's elsewhere) with the caches in the query's dtype); key_cache and value_cache (num_pages, page_size, K, H), page_size 1, 16, 32, 64, 128
    or 256; ``block_table`` int32 (B, max_pages) (sequence b's tokens p * page_size .. in page
    block_table[b, p]); ``seqlens_k`` int32 (B,), each at most ``max_seqlen_k`` (a Python int that
    sizes the plan). ``is_causal`` masks bottom-right. float16/bfloat16 query; the caches in its
    dtype or float8_e4m3fn/e5m2 with ``descale_k``/``descale_v`` (float32 scalars). The result is
    (B, T, N, H) in the query's dtype."""
    query, kc, vc = jnp.asarray(query), jnp.asarray(key_cache), jnp.asarray(value_cache)
    table, lengths = jnp.asarray(block_table), jnp.asarray(seqlens_k)
    if query.ndim != 4:
        raise ValueError(f"attntune: query must be (B, T, N, H), got shape {tuple(query.shape)}")
    if kc.ndim != 4 or kc.shape != vc.shape or kc.dtype != vc.dtype:
        raise ValueError(f"attntune: key_cache {tuple(kc.shape)} {kc.dtype} and value_cache {tuple(vc.shape)} "
                         f"{vc.dtype} must be (num_pages, page_size, K, H) of one shape and dtype")
    if query.dtype not in (jnp.float16, jnp.bfloat16):
        raise TypeError(f"attntune: paged_attention takes a float16 or bfloat16 query, got {query.dtype}")
    fp8_cache = _common.is_fp8(kc.dtype)
    if kc.dtype != query.dtype and not fp8_cache:
        raise TypeError(f"attntune: the caches must be in the query's dtype ({query.dtype}) or FP8, got {kc.dtype}")
    b, t, n, h = query.shape
    max_seqlen_k = _common.positive_length("max_seqlen_k", max_seqlen_k)
    if table.dtype != jnp.int32 or table.ndim != 2 or table.shape[0] != b:
        raise ValueError(f"attntune: block_table must be int32 (B={b}, max_pages), got {table.dtype} "
                         f"{tuple(table.shape)}")
    _common.check_paged(page_size=kc.shape[1], cache_head_dim=kc.shape[3], head_dim=h, max_pages=table.shape[1],
                        max_seqlen_k=max_seqlen_k)
    if lengths.dtype != jnp.int32 or lengths.shape != (b,):
        raise ValueError(f"attntune: seqlens_k must be int32 ({b},), got {lengths.dtype} {tuple(lengths.shape)}")
    operands = [query, kc, vc, table, lengths]
    if fp8_cache:
        if descale_k is None or descale_v is None:
            raise ValueError("attntune: an FP8 KV cache needs descale_k and descale_v (float32 scalars)")
        operands += [_descale(descale_k, "descale_k"), _descale(descale_v, "descale_v")]
    elif descale_k is not None or descale_v is not None:
        raise ValueError("attntune: descale_k/descale_v only apply to an FP8 KV cache")
    shape = _common.make_shape(batch=b, q_len=t, kv_len=max_seqlen_k, q_heads=n, kv_heads=kc.shape[2],
                               head_dim=h, dtype=_common.dtype_name(query.dtype),
                               mask=_common.mask_code(is_causal, "bottom_right"), scale=scale)
    call = jax.ffi.ffi_call(TARGET_PAGED, jax.ShapeDtypeStruct(query.shape, query.dtype), vmap_method="sequential")
    return call(*operands, mask=np.int32(shape.mask), scale=np.float32(shape.scale), max_k=np.int32(max_seqlen_k),
                impl=implementation or "", db=_common.resolve_db(db))
