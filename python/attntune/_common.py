"""Shape, dtype and mask handling shared by the JAX and PyTorch front ends and plan_info."""

from __future__ import annotations

import os
from typing import Any

from . import _lib
from ._lib import Layout, Shape, Strides, UnsupportedArgumentError

_DTYPE_NAMES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16",
    "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
    "f32": "f32", "f16": "f16", "bf16": "bf16", "e4m3": "e4m3", "e5m2": "e5m2",
}
_ALIGNMENTS = {"top_left": "causal", "bottom_right": "causal-br"}


def dtype_name(dtype: Any) -> str:
    """attntune's name ("bf16", "e4m3", ...) of a numpy, JAX or PyTorch dtype (or of a name)."""
    text = str(dtype)
    if text.startswith("torch."):
        text = text[len("torch."):]
    name = getattr(dtype, "name", None)
    for candidate in (text, name):
        if candidate in _DTYPE_NAMES:
            return _DTYPE_NAMES[candidate]
    raise TypeError(f"attntune: dtype {text} is not supported "
                    "(expected float32, float16, bfloat16, float8_e4m3fn or float8_e5m2)")


def mask_code(is_causal: bool, causal_alignment: str) -> int:
    if causal_alignment not in _ALIGNMENTS:
        raise ValueError(f"attntune: causal_alignment '{causal_alignment}' unknown "
                         f"(expected {', '.join(_ALIGNMENTS)})")
    return _lib.MASKS[_ALIGNMENTS[causal_alignment]] if is_causal else _lib.MASKS["none"]


def resolve_db(db: str | os.PathLike | None) -> str:
    """The tuning cache to read: the argument, else $ATTNTUNE_DB, else none ("")."""
    if db is None:
        db = os.environ.get("ATTNTUNE_DB", "")
    return os.fspath(db)


def reject(**unsupported: Any) -> None:
    """Raise UnsupportedArgumentError naming every argument that is set (not None/0/False)."""
    named = [name for name, value in unsupported.items() if value is not None]
    if named:
        raise UnsupportedArgumentError(
            f"attntune: {', '.join(named)} not supported (attntune computes softmax(Q K^T * scale) V "
            "with no mask or a causal one; use is_causal=True, or jax.nn.dot_product_attention / "
            "torch SDPA for the others)")


def is_fp8(dtype: Any) -> bool:
    """True for float8_e4m3fn / float8_e5m2 (of numpy, JAX or PyTorch); False for other dtypes,
    supported or not."""
    try:
        return dtype_name(dtype) in _lib.FP8_DTYPES
    except TypeError:
        return False


def positive_length(name: str, value: Any) -> int:
    """A planned maximum length (max_seqlen_q/k): a positive Python or numpy int."""
    if isinstance(value, bool) or not hasattr(value, "__index__") or value.__index__() < 1:
        raise ValueError(f"attntune: {name} must be a positive int (the longest length the plan takes), "
                         f"got {value!r}")
    return value.__index__()


def check_paged(*, page_size: int, cache_head_dim: int, head_dim: int, max_pages: int, max_seqlen_k: int) -> None:
    """The paged-cache geometry both front ends check: an allowed page size, one head dim, and a
    block table wide enough for max_seqlen_k."""
    if page_size not in _lib.PAGE_SIZES:
        raise ValueError(f"attntune: page size {page_size} (key_cache.shape[1]) is not one of {_lib.PAGE_SIZES}")
    if cache_head_dim != head_dim:
        raise ValueError(f"attntune: key_cache head dim {cache_head_dim} differs from the query's {head_dim}")
    if max_pages * page_size < max_seqlen_k:
        raise ValueError(f"attntune: block_table has {max_pages} pages per sequence, too few for "
                         f"max_seqlen_k {max_seqlen_k} at page size {page_size}")


def check_packed(*, query: tuple, key: tuple, value: tuple, dtypes: tuple) -> None:
    """The packed (varlen) tensors' checks both front ends make, on shapes and dtypes: each
    (total, heads, head_dim), key and value of one shape, one head dim, float16 or bfloat16 in
    one dtype."""
    for name, shape in (("query", query), ("key", key), ("value", value)):
        if len(shape) != 3:
            raise ValueError(f"attntune: {name} must be (total, heads, head_dim), got shape {tuple(shape)}")
    if tuple(key) != tuple(value):
        raise ValueError(f"attntune: key {tuple(key)} and value {tuple(value)} must have one shape")
    if query[2] != key[2]:
        raise ValueError(f"attntune: head dim of query ({query[2]}) and key ({key[2]}) differ")

    def is_16bit(dtype: Any) -> bool:
        try:
            return dtype_name(dtype) in ("f16", "bf16")
        except TypeError:
            return False

    if len({str(d) for d in dtypes}) != 1 or not is_16bit(dtypes[0]):
        raise TypeError(f"attntune: varlen_attention takes float16 or bfloat16 query, key and value in one "
                        f"dtype, got {', '.join(str(d) for d in dtypes)}")


def make_shape(*, batch: int, q_len: int, kv_len: int, q_heads: int, kv_heads: int, head_dim: int,
               v_head_dim: int | None = None, dtype: str, mask: int, scale: float | None) -> Shape:
    """An at_shape from dimensions, with a ValueError that names the first problem."""
    check_dims(q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, v_head_dim=v_head_dim,
               scale=scale)
    s = Shape(batch=batch, q_len=q_len, kv_len=kv_len, q_heads=q_heads, kv_heads=kv_heads,
              head_dim=head_dim, dtype=_lib.DTYPES[dtype], mask=mask,
              scale=0.0 if scale is None else float(scale), with_lse=0)
    if _lib.core.at_shape_check(s) != 0:
        raise ValueError(f"attntune: {_lib.core.at_last_error().decode()}")
    return s


def check_dims(*, q_heads: int, kv_heads: int, head_dim: int, v_head_dim: int | None = None,
               scale: float | None = None) -> None:
    """The checks of make_shape that need no C call (torch.compile traces them)."""
    if v_head_dim is not None and v_head_dim != head_dim:
        raise ValueError(f"attntune: value head dim {v_head_dim} differs from the query/key head dim "
                         f"{head_dim} (attntune needs them equal)")
    if kv_heads < 1 or q_heads % kv_heads != 0:
        raise ValueError(f"attntune: {q_heads} query heads are not a multiple of {kv_heads} key/value "
                         "heads (GQA/MQA need Nq % Nkv == 0)")
    if scale is not None and not scale > 0:
        raise ValueError(f"attntune: scale {scale} must be positive")


def shape_key(s: Shape) -> str:
    import ctypes
    buf = ctypes.create_string_buffer(160)
    _lib.core.at_shape_key(s, buf, len(buf))
    return buf.value.decode()


def strides(batch: int, seq: int, head: int) -> Strides:
    return Strides(batch=batch, seq=seq, head=head)


def bshd_layout(s: Shape) -> Layout:
    return _lib.core.at_layout_bshd(s)


def bnth_layout(s: Shape) -> Layout:
    """Contiguous (B, N, T, H) inputs (torch SDPA's layout) and the torch op's output, which is
    (B, T, N, H) in memory (returned as a transposed view)."""
    t, sk, n, nk, d = s.q_len, s.kv_len, s.q_heads, s.kv_heads, s.head_dim
    q = strides(n * t * d, d, t * d)
    kv = strides(nk * sk * d, d, sk * d)
    o = strides(t * n * d, n * d, d)
    return Layout(q=q, k=kv, v=kv, o=o)
