"""CPU tests: the package imports without a GPU, reports errors clearly, and its ctypes structs
match the C compiler's layout of include/attntune.h."""

import ctypes

import pytest

import attntune
from attntune import _common, _lib


def test_imports_without_gpu():
    import attntune.jax  # noqa: F401
    import attntune.torch  # noqa: F401
    assert attntune.__version__ == attntune.version()
    assert attntune.version().count(".") == 2


def test_struct_layout_matches_header():
    rows = _lib.layout_table()
    assert rows, "the layout table is empty"
    seen = {}
    for struct, field, offset, size in rows:
        assert struct in _lib.STRUCTS, f"{struct} has no ctypes declaration in attntune/_lib.py"
        cls = _lib.STRUCTS[struct]
        if field is None:
            assert ctypes.sizeof(cls) == size, f"sizeof({struct}): C {size}, ctypes {ctypes.sizeof(cls)}"
            continue
        seen.setdefault(struct, []).append(field)
        desc = getattr(cls, field, None)
        assert desc is not None, f"{struct}.{field} missing in the ctypes declaration"
        assert (desc.offset, desc.size) == (offset, size), (
            f"{struct}.{field}: C offset {offset} size {size}, ctypes offset {desc.offset} size {desc.size}")
    for struct, cls in _lib.STRUCTS.items():
        declared = [f[0] for f in cls._fields_]
        assert seen.get(struct) == declared, (
            f"{struct}: fields in C order {seen.get(struct)}, ctypes declares {declared}")


def test_layout_check_catches_a_drift():
    # The comparison above must fail for a struct whose ctypes declaration differs.
    class Wrong(ctypes.Structure):
        _fields_ = [("batch", ctypes.c_int), ("q_len", ctypes.c_int64)]
    c_size = next(size for s, f, _, size in _lib.layout_table() if s == "at_shape" and f is None)
    assert ctypes.sizeof(Wrong) != c_size


def test_plan_info_without_gpu_raises_attntune_error():
    # The no-GPU path: a clear library error naming the call. Where a GPU answers, the call
    # succeeds and this path cannot be seen (the GPU tests cover plan_info there).
    try:
        info = attntune.plan_info((1, 128, 8, 64), (1, 128, 8, 64), dtype="bf16")
    except attntune.AttntuneError as err:
        assert err.status in ("AT_ERR_NO_DRIVER", "AT_ERR_NO_DEVICE", "AT_ERR_CUDA")
        assert "at_context_create" in str(err)
        return
    pytest.skip(f"a GPU is present (plan_info chose {info.impl}): "
                "the no-GPU error path cannot be seen here")


def test_plan_info_argument_errors():
    with pytest.raises(ValueError, match="not a multiple"):
        attntune.plan_info((1, 128, 8, 64), (1, 128, 3, 64), dtype="bf16")
    with pytest.raises(ValueError, match="layout"):
        attntune.plan_info((1, 128, 8, 64), (1, 128, 8, 64), dtype="bf16", layout="NTH")
    with pytest.raises(TypeError, match="int8"):
        attntune.plan_info((1, 128, 8, 64), (1, 128, 8, 64), dtype="int8")
    with pytest.raises(ValueError, match="pass dtype"):
        attntune.plan_info((1, 128, 8, 64), (1, 128, 8, 64))


def test_shape_key_and_checks():
    s = _common.make_shape(batch=2, q_len=128, kv_len=256, q_heads=8, kv_heads=2, head_dim=64,
                           dtype="bf16", mask=_common.mask_code(True, "top_left"), scale=None)
    assert _common.shape_key(s) == "b2.t128.s256.hq8.hkv2.d64.bf16.causal"
    with pytest.raises(ValueError, match="head_dim"):
        _common.make_shape(batch=1, q_len=1, kv_len=1, q_heads=1, kv_heads=1, head_dim=1000,
                           dtype="bf16", mask=0, scale=None)
    with pytest.raises(ValueError, match="causal_alignment"):
        _common.mask_code(True, "middle")


def test_db_resolution(monkeypatch):
    monkeypatch.setenv("ATTNTUNE_DB", "/tmp/x.db")
    assert _common.resolve_db(None) == "/tmp/x.db"
    assert _common.resolve_db("y.db") == "y.db"
    monkeypatch.delenv("ATTNTUNE_DB")
    assert _common.resolve_db(None) == ""


def test_cache_starts_empty_and_clears():
    attntune.clear_plans()
    assert attntune.cached_plans() == 0
