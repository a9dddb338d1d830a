"""CPU tests of attntune.jax: tracing under jax.jit to the custom call, and argument errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attntune
import attntune.jax as atj


def lowered(fn, *args):
    return jax.jit(fn).lower(*args).as_text()


def arrays(b=2, t=128, s=128, n=8, k=8, h=64, dtype=jnp.bfloat16):
    return (jax.ShapeDtypeStruct((b, t, n, h), dtype), jax.ShapeDtypeStruct((b, s, k, h), dtype),
            jax.ShapeDtypeStruct((b, s, k, h), dtype))


def custom_calls(text):
    return [line for line in text.splitlines() if "custom_call" in line]


def test_traces_to_the_custom_call():
    text = lowered(lambda q, k, v: atj.dot_product_attention(q, k, v), *arrays())
    calls = custom_calls(text)
    assert len(calls) == 1 and f"@{atj.TARGET}" in calls[0]
    assert "mask = 0 : i32" in calls[0]
    assert "tensor<2x128x8x64xbf16>" in calls[0]


def test_causal_scale_impl_db_attributes(tmp_path):
    db = str(tmp_path / "t.db")
    fn = lambda q, k, v: atj.dot_product_attention(q, k, v, is_causal=True, scale=0.5,  # noqa: E731
                                                   implementation="fused", db=db)
    call = custom_calls(lowered(fn, *arrays()))[0]
    assert "mask = 1 : i32" in call and "scale = 5.000000e-01 : f32" in call
    assert 'impl = "fused"' in call and f'db = "{db}"' in call
    fn = lambda q, k, v: atj.dot_product_attention(q, k, v, is_causal=True,  # noqa: E731
                                                   causal_alignment="bottom_right")
    assert "mask = 2 : i32" in custom_calls(lowered(fn, *arrays(t=16, s=256)))[0]


def test_db_from_environment(monkeypatch):
    monkeypatch.setenv("ATTNTUNE_DB", "/somewhere/tuned.db")
    call = custom_calls(lowered(lambda q, k, v: atj.dot_product_attention(q, k, v), *arrays()))[0]
    assert 'db = "/somewhere/tuned.db"' in call


@pytest.mark.parametrize("kv_heads", [8, 2, 1])
def test_mha_gqa_mqa_shapes(kv_heads):
    out = jax.eval_shape(atj.dot_product_attention, *arrays(k=kv_heads, s=96))
    assert out.shape == (2, 128, 8, 64) and out.dtype == jnp.bfloat16


def test_unbatched_input():
    q, k, v = (jax.ShapeDtypeStruct(a.shape[1:], a.dtype) for a in arrays())
    out = jax.eval_shape(atj.dot_product_attention, q, k, v)
    assert out.shape == (128, 8, 64)


def test_fp8_takes_descales_and_gives_bf16():
    q, k, v = arrays(dtype=jnp.float8_e4m3fn)
    d = jax.ShapeDtypeStruct((), jnp.float32)
    fn = lambda q, k, v, a, b, c: atj.dot_product_attention(  # noqa: E731
        q, k, v, descale_q=a, descale_k=b, descale_v=c)
    text = lowered(fn, q, k, v, d, d, d)
    call = custom_calls(text)[0]
    assert "f8E4M3FN" in call and "-> tensor<2x128x8x64xbf16>" in call
    with pytest.raises(ValueError, match="descale_q, descale_k, descale_v"):
        jax.eval_shape(atj.dot_product_attention, q, k, v)
    with pytest.raises(ValueError, match="only apply to FP8"):
        jax.eval_shape(lambda q, k, v: atj.dot_product_attention(q, k, v, descale_q=1.0), *arrays())


@pytest.mark.parametrize("name", ["bias", "mask", "query_seq_lengths", "key_value_seq_lengths",
                                  "local_window_size"])
def test_unsupported_arguments_are_named(name):
    q, k, v = (jnp.zeros(a.shape, a.dtype) for a in arrays(b=1, t=8, s=8))
    value = (2, 2) if name == "local_window_size" else jnp.zeros((1, 8, 8, 8), bool)
    with pytest.raises(attntune.UnsupportedArgumentError, match=name):
        atj.dot_product_attention(q, k, v, **{name: value})


def test_shape_errors():
    bad = [
        (arrays(k=3), "not a multiple"),
        ((jax.ShapeDtypeStruct((2, 128, 8, 64), jnp.bfloat16),
          jax.ShapeDtypeStruct((2, 128, 8, 32), jnp.bfloat16),
          jax.ShapeDtypeStruct((2, 128, 8, 32), jnp.bfloat16)), "head dim"),
        ((jax.ShapeDtypeStruct((2, 128, 8, 64), jnp.bfloat16),
          jax.ShapeDtypeStruct((3, 128, 8, 64), jnp.bfloat16),
          jax.ShapeDtypeStruct((3, 128, 8, 64), jnp.bfloat16)), "batch"),
        ((jax.ShapeDtypeStruct((2, 128, 8, 64), jnp.bfloat16),
          jax.ShapeDtypeStruct((2, 128, 8, 64), jnp.bfloat16),
          jax.ShapeDtypeStruct((2, 128, 8, 32), jnp.bfloat16)), "one shape"),
        ((jax.ShapeDtypeStruct((128, 64), jnp.bfloat16),) * 3, r"\(B, T, N, H\)"),
    ]
    for args, message in bad:
        with pytest.raises(ValueError, match=message):
            jax.eval_shape(atj.dot_product_attention, *args)
    with pytest.raises(TypeError, match="one dtype"):
        q, k, v = arrays()
        jax.eval_shape(atj.dot_product_attention, q, jax.ShapeDtypeStruct(k.shape, jnp.float16), v)
    with pytest.raises(TypeError, match="int8"):
        jax.eval_shape(atj.dot_product_attention, *arrays(dtype=jnp.int8))


def test_vmap_traces():
    q, k, v = (jax.ShapeDtypeStruct((3,) + a.shape, a.dtype) for a in arrays())
    out = jax.eval_shape(jax.vmap(atj.dot_product_attention), q, k, v)
    assert out.shape == (3, 2, 128, 8, 64)


def test_numpy_inputs_accepted():
    q = np.zeros((1, 8, 2, 64), np.float16)
    out = jax.eval_shape(atj.dot_product_attention, q, q, q)
    assert out.dtype == jnp.float16


# ---- packed sequences (varlen) ----------------------------------------------------------------

def packed(total_q=37, total_k=50, n=8, k=2, h=64, b=2, dtype=jnp.bfloat16):
    return (jax.ShapeDtypeStruct((total_q, n, h), dtype), jax.ShapeDtypeStruct((total_k, k, h), dtype),
            jax.ShapeDtypeStruct((total_k, k, h), dtype), jax.ShapeDtypeStruct((b + 1,), jnp.int32),
            jax.ShapeDtypeStruct((b + 1,), jnp.int32))


def test_varlen_traces_to_its_custom_call():
    fn = lambda q, k, v, cq, ck: atj.varlen_attention(q, k, v, cq, ck, 27, 30, is_causal=True,  # noqa: E731
                                                       causal_alignment="bottom_right")
    calls = custom_calls(lowered(fn, *packed()))
    assert len(calls) == 1 and f"@{atj.TARGET_VARLEN}" in calls[0]
    assert "max_q = 27 : i32" in calls[0] and "max_k = 30 : i32" in calls[0]
    assert "mask = 2 : i32" in calls[0] and "tensor<37x8x64xbf16>" in calls[0]
    out = jax.eval_shape(fn, *packed())
    assert out.shape == (37, 8, 64) and out.dtype == jnp.bfloat16


def test_varlen_argument_errors():
    q, k, v, cq, ck = (jnp.zeros(a.shape, a.dtype) for a in packed())
    with pytest.raises(ValueError, match="cu_seqlens_q must be int32"):
        atj.varlen_attention(q, k, v, cq.astype(jnp.float32), ck, 27, 30)
    with pytest.raises(ValueError, match="must have one length"):
        atj.varlen_attention(q, k, v, cq, jnp.zeros(4, jnp.int32), 27, 30)
    with pytest.raises(ValueError, match="max_seqlen_k must be a positive int"):
        atj.varlen_attention(q, k, v, cq, ck, 27, 0)
    with pytest.raises(ValueError, match=r"\(total, heads, head_dim\)"):
        atj.varlen_attention(q[None], k, v, cq, ck, 27, 30)
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        atj.varlen_attention(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32), cq, ck, 27, 30)
    with pytest.raises(ValueError, match="not a multiple"):
        atj.varlen_attention(q, jnp.zeros((50, 3, 64), q.dtype), jnp.zeros((50, 3, 64), q.dtype), cq, ck, 27, 30)


# ---- a paged KV cache -------------------------------------------------------------------------

def paged_args(b=3, t=1, n=32, k=8, h=128, pages=40, page=16, max_pages=8, cache=jnp.bfloat16):
    return (jax.ShapeDtypeStruct((b, t, n, h), jnp.bfloat16), jax.ShapeDtypeStruct((pages, page, k, h), cache),
            jax.ShapeDtypeStruct((pages, page, k, h), cache), jax.ShapeDtypeStruct((b, max_pages), jnp.int32),
            jax.ShapeDtypeStruct((b,), jnp.int32))


def test_paged_traces_to_its_custom_call():
    fn = lambda q, kc, vc, tb, ln: atj.paged_attention(q, kc, vc, tb, ln, 128, is_causal=True)  # noqa: E731
    calls = custom_calls(lowered(fn, *paged_args(t=4)))
    assert len(calls) == 1 and f"@{atj.TARGET_PAGED}" in calls[0]
    assert "max_k = 128 : i32" in calls[0] and "mask = 2 : i32" in calls[0]
    out = jax.eval_shape(fn, *paged_args(t=4))
    assert out.shape == (3, 4, 32, 128) and out.dtype == jnp.bfloat16
    fp8 = lambda q, kc, vc, tb, ln: atj.paged_attention(q, kc, vc, tb, ln, 128, descale_k=1.0,  # noqa: E731
                                                         descale_v=1.0)
    calls = custom_calls(lowered(fp8, *paged_args(cache=jnp.float8_e4m3fn)))
    assert len(calls) == 1 and "f8E4M3FN" in calls[0]


def test_paged_argument_errors():
    q, kc, vc, tb, ln = (jnp.zeros(a.shape, a.dtype) for a in paged_args())
    with pytest.raises(ValueError, match="page size 8"):
        atj.paged_attention(q, jnp.zeros((40, 8, 8, 128), q.dtype), jnp.zeros((40, 8, 8, 128), q.dtype), tb, ln, 64)
    with pytest.raises(ValueError, match="too few for max_seqlen_k 200"):
        atj.paged_attention(q, kc, vc, tb, ln, 200)
    with pytest.raises(ValueError, match="seqlens_k must be int32"):
        atj.paged_attention(q, kc, vc, tb, ln[:2], 128)
    with pytest.raises(ValueError, match="block_table must be int32"):
        atj.paged_attention(q, kc, vc, tb.astype(jnp.float32), ln, 128)
    with pytest.raises(ValueError, match="only apply to an FP8 KV cache"):
        atj.paged_attention(q, kc, vc, tb, ln, 128, descale_k=1.0)
    with pytest.raises(ValueError, match="needs descale_k and descale_v"):
        atj.paged_attention(q, kc.astype(jnp.float8_e4m3fn), vc.astype(jnp.float8_e4m3fn), tb, ln, 128)
    with pytest.raises(TypeError, match="the query's dtype"):
        atj.paged_attention(q, kc.astype(jnp.float16), vc.astype(jnp.float16), tb, ln, 128)
