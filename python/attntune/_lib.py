"""ctypes bindings of libattntune (include/attntune.h) and of the package's libattntune_py.

The Structure classes below mirror the C structs of attntune.h. They are checked against the
compiler's view (sizeof/offsetof exported by libattntune_py, see python/csrc/layout.c) by
tests/test_layout.py, so a header change that this file missed fails a test.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, c_char, c_char_p, c_double, c_float, c_int, c_int64, c_size_t, c_void_p

_HERE = os.path.dirname(os.path.abspath(__file__))


class AttntuneError(RuntimeError):
    """A failing attntune call. ``status`` is the at_status name ("AT_ERR_CUDA", ...)."""

    def __init__(self, status: str, message: str):
        super().__init__(f"{status}: {message}" if message else status)
        self.status = status


class UnsupportedArgumentError(NotImplementedError, ValueError):
    """An argument of the JAX/PyTorch signature that attntune does not implement (bias, masks
    given as arrays, dropout, ...). The message names the argument."""


# ---- the C structs ---------------------------------------------------------------------------

class Shape(ctypes.Structure):
    _fields_ = [
        ("batch", c_int),
        ("q_len", c_int),
        ("kv_len", c_int),
        ("q_heads", c_int),
        ("kv_heads", c_int),
        ("head_dim", c_int),
        ("dtype", c_int),  # at_dtype
        ("mask", c_int),  # at_mask
        ("scale", c_float),
        ("with_lse", c_int),
        ("kv_dtype", c_int),  # at_dtype of K and V; 0 (AT_KV_SAME): the same as dtype
    ]


class Strides(ctypes.Structure):
    _fields_ = [("batch", c_int64), ("seq", c_int64), ("head", c_int64)]


class Tensors(ctypes.Structure):
    _fields_ = [
        ("q", c_void_p),
        ("k", c_void_p),
        ("v", c_void_p),
        ("o", c_void_p),
        ("lse", c_void_p),
        ("q_stride", Strides),
        ("k_stride", Strides),
        ("v_stride", Strides),
        ("o_stride", Strides),
    ]


class Layout(ctypes.Structure):
    _fields_ = [("q", Strides), ("k", Strides), ("v", Strides), ("o", Strides)]


class PlanOptions(ctypes.Structure):
    _fields_ = [("impl", c_char_p)]


class Fp8Args(ctypes.Structure):
    _fields_ = [("descale_q", c_void_p), ("descale_k", c_void_p), ("descale_v", c_void_p)]


class PlanInfoC(ctypes.Structure):
    _fields_ = [
        ("impl", c_char * 96),
        ("choice", c_int),  # at_choice
        ("reason", c_char * 768),
        ("tuned_shape", c_char * 160),
        ("tuned_ms", c_double),
        ("cudnn_ms", c_double),
        ("compiled", c_int),
        ("create_ms", c_double),
    ]


class ServingLayout(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("q_layout", c_int),  # at_seq_layout
        ("kv_layout", c_int),
        ("page_size", c_int),
        ("max_pages_per_seq", c_int),
        ("strides", Layout),
    ]


class ServingTensors(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        *Tensors._fields_,  # at_serving_tensors begins as at_tensors does
        ("cu_seqlens_q", c_void_p),
        ("cu_seqlens_kv", c_void_p),
        ("block_table", c_void_p),
        ("seqlens_kv", c_void_p),
        ("total_q", c_int),
        ("total_kv", c_int),
        ("num_pages", c_int),
    ]


#: name in attntune.h -> ctypes class, for the layout test.
STRUCTS = {
    "at_shape": Shape,
    "at_strides": Strides,
    "at_tensors": Tensors,
    "at_layout": Layout,
    "at_plan_options": PlanOptions,
    "at_fp8_args": Fp8Args,
    "at_plan_info": PlanInfoC,
    "at_serving_layout": ServingLayout,
    "at_serving_tensors": ServingTensors,
}


class LayoutRow(ctypes.Structure):
    _fields_ = [("type", c_char_p), ("field", c_char_p), ("offset", c_size_t), ("size", c_size_t)]


# at_dtype and at_mask values, as in attntune.h.
DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "e4m3": 3, "e5m2": 4}
FP8_DTYPES = ("e4m3", "e5m2")
MASKS = {"none": 0, "causal": 1, "causal-br": 2}
# at_seq_layout values.
SEQ_LAYOUTS = {"padded": 0, "ragged": 1, "paged": 2}
PAGE_SIZES = (1, 16, 32, 64, 128, 256)


# ---- loading ---------------------------------------------------------------------------------

def _load(name: str) -> ctypes.CDLL:
    path = os.path.join(_HERE, name)
    if not os.path.exists(path):
        raise ImportError(
            f"attntune: {path} is missing; install the package with pip from the repository "
            "(pip install ./python) so that the native libraries are built")
    return ctypes.CDLL(path)


core = _load("libattntune.so.0")
py = _load("libattntune_py.so")

core.at_status_name.argtypes = [c_int]
core.at_status_name.restype = c_char_p
core.at_last_error.argtypes = []
core.at_last_error.restype = c_char_p
core.at_version.argtypes = []
core.at_version.restype = c_char_p
core.at_shape_check.argtypes = [POINTER(Shape)]
core.at_shape_check.restype = c_int
core.at_shape_key.argtypes = [POINTER(Shape), c_char_p, c_size_t]
core.at_shape_key.restype = None
core.at_layout_bshd.argtypes = [POINTER(Shape)]
core.at_layout_bshd.restype = Layout
core.at_plan_describe.argtypes = [c_void_p, POINTER(PlanInfoC)]
core.at_plan_describe.restype = c_int
core.at_choice_name.argtypes = [c_int]
core.at_choice_name.restype = c_char_p
core.at_plan_benchmark.argtypes = [c_void_p, POINTER(Tensors), POINTER(Fp8Args), c_int, c_int,
                                   POINTER(c_double)]
core.at_plan_benchmark.restype = c_int
core.at_context_create.argtypes = [c_int, c_char_p, ctypes.c_uint, POINTER(c_void_p)]
core.at_context_create.restype = c_int
core.at_context_destroy.argtypes = [c_void_p]
core.at_context_destroy.restype = None
core.at_context_describe.argtypes = [c_void_p]
core.at_context_describe.restype = c_char_p

core.at_serving_check.argtypes = [c_void_p, POINTER(ServingTensors)]
core.at_serving_check.restype = c_int

py.atpy_plan_get.argtypes = [c_int, POINTER(Shape), POINTER(Layout), c_char_p, c_char_p,
                             POINTER(c_void_p)]
py.atpy_plan_get.restype = c_int
py.atpy_plan_run.argtypes = [c_void_p, POINTER(Tensors), POINTER(Fp8Args), c_void_p]
py.atpy_plan_run.restype = c_int
py.atpy_plan_get_serving.argtypes = [c_int, POINTER(Shape), POINTER(ServingLayout), c_char_p, c_char_p,
                                     POINTER(c_void_p)]
py.atpy_plan_get_serving.restype = c_int
py.atpy_plan_run_serving.argtypes = [c_void_p, POINTER(ServingTensors), POINTER(Fp8Args), c_void_p]
py.atpy_plan_run_serving.restype = c_int
py.atpy_last_error.argtypes = []
py.atpy_last_error.restype = c_char_p
py.atpy_cache_size.argtypes = []
py.atpy_cache_size.restype = c_int
py.atpy_cache_clear.argtypes = []
py.atpy_cache_clear.restype = None
py.atpy_layout_row.argtypes = [c_int]
py.atpy_layout_row.restype = POINTER(LayoutRow)

#: The XLA FFI handlers (C functions of libattntune_py): padded tensors, packed sequences, a
#: paged KV cache.
xla_handler = py.attntune_xla_sdpa
xla_varlen_handler = py.attntune_xla_varlen
xla_paged_handler = py.attntune_xla_paged


def status_name(rc: int) -> str:
    return core.at_status_name(rc).decode()


def check_core(rc: int, what: str) -> None:
    """Raise AttntuneError for a failed libattntune call, with at_last_error()."""
    if rc != 0:
        raise AttntuneError(status_name(rc), f"{what}: {core.at_last_error().decode()}")


def check_py(rc: int) -> None:
    """Raise AttntuneError for a failed atpy_* call, with atpy_last_error()."""
    if rc != 0:
        raise AttntuneError(status_name(rc), py.atpy_last_error().decode())


def layout_table() -> list[tuple[str, str | None, int, int]]:
    """(struct, field or None, offset, size) rows as the C compiler laid them out."""
    rows = []
    i = 0
    while True:
        p = py.atpy_layout_row(i)
        if not p:
            return rows
        r = p.contents
        rows.append((r.type.decode(), r.field.decode() if r.field else None, r.offset, r.size))
        i += 1


def encode(text: str | None) -> bytes:
    return (text or "").encode()
