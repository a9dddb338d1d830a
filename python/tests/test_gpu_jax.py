"""GPU tests of attntune.jax against jax.nn.dot_product_attention on fresh random inputs, and the
JAX call's time against the same plan run from C. Skipped without a GPU visible to JAX."""

import ctypes
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import needs_jax_gpu, seed_for

pytestmark = [pytest.mark.gpu, needs_jax_gpu]

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import attntune  # noqa: E402
import attntune.jax as atj  # noqa: E402
from attntune import _common, _lib  # noqa: E402

TOL = {jnp.bfloat16: 2e-2, jnp.float16: 5e-3, jnp.float32: 2e-3}


def inputs(b, t, s, n, k, h, dtype, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, t, n, h), np.float32)
    kk = rng.standard_normal((b, s, k, h), np.float32)
    v = rng.standard_normal((b, s, k, h), np.float32)
    return [jnp.asarray(x, dtype) for x in (q, kk, v)]


def reference(q, k, v, *, is_causal=False, bottom_right=False, scale=None):
    """jax.nn.dot_product_attention in float32 on the same (rounded) inputs."""
    q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
    t, s = q.shape[1], k.shape[1]
    if bottom_right and is_causal:
        mask = jnp.tril(jnp.ones((t, s), bool), k=s - t)[None, None]
        return jax.nn.dot_product_attention(q, k, v, mask=mask, scale=scale, implementation="xla")
    return jax.nn.dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, implementation="xla")


CASES = [
    # b, t, s, n, k, h, dtype, causal, bottom_right
    (2, 128, 128, 8, 8, 64, jnp.bfloat16, False, False),
    (2, 256, 256, 8, 8, 64, jnp.bfloat16, True, False),
    (1, 100, 77, 8, 2, 64, jnp.bfloat16, False, False),   # GQA, odd lengths
    (2, 64, 192, 8, 2, 128, jnp.bfloat16, True, False),   # causal top-left, T < S
    (2, 16, 300, 8, 1, 128, jnp.bfloat16, True, True),    # MQA, bottom-right (decode-like)
    (1, 333, 333, 4, 4, 64, jnp.float16, True, False),
    (1, 128, 128, 4, 2, 96, jnp.float16, False, False),
    (1, 64, 64, 2, 2, 64, jnp.float32, True, False),      # naive kernels
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"b{c[0]}t{c[1]}s{c[2]}n{c[3]}k{c[4]}h{c[5]}"
                         f"{jnp.dtype(c[6]).name}{'-causal' if c[7] else ''}{'-br' if c[8] else ''}")
def test_matches_jax_nn(case):
    b, t, s, n, k, h, dtype, causal, br = case
    q, kk, v = inputs(b, t, s, n, k, h, dtype, seed=seed_for(case))
    fn = jax.jit(lambda q, k, v: atj.dot_product_attention(
        q, k, v, is_causal=causal, causal_alignment="bottom_right" if br else "top_left"))
    out = fn(q, kk, v)
    ref = reference(q, kk, v, is_causal=causal, bottom_right=br)
    assert out.dtype == dtype and out.shape == q.shape
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(ref), atol=TOL[dtype], rtol=TOL[dtype])


@pytest.mark.parametrize("impl", ["naive", "cudnn", "fused"])
def test_forced_implementations(impl):
    q, k, v = inputs(2, 128, 128, 8, 2, 64, jnp.bfloat16, seed=seed_for(7))
    try:
        out = jax.jit(lambda q, k, v: atj.dot_product_attention(
            q, k, v, is_causal=True, implementation=impl))(q, k, v)
    except Exception as e:  # cuDNN may be absent on the machine
        if impl == "cudnn" and "CUDNN" in str(e):
            pytest.skip(f"cuDNN unavailable: {e}")
        raise
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(reference(q, k, v, is_causal=True)),
                               atol=2e-2, rtol=2e-2)


def test_scale_and_unbatched():
    q, k, v = inputs(1, 64, 80, 4, 4, 64, jnp.bfloat16, seed=seed_for(3))
    out = atj.dot_product_attention(q[0], k[0], v[0], scale=0.3)
    ref = reference(q, k, v, scale=0.3)[0]
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(ref), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("fp8", [jnp.float8_e4m3fn, jnp.float8_e5m2])
def test_fp8_with_descales(fp8):
    q, k, v = inputs(1, 128, 128, 4, 4, 128, jnp.float32, seed=seed_for(11))
    fmax = float(jnp.finfo(fp8).max)
    codes, descales = [], []
    for x in (q, k, v):
        scale = fmax / float(jnp.max(jnp.abs(x)))
        codes.append((x * scale).astype(fp8))
        descales.append(jnp.float32(1.0 / scale))
    out = jax.jit(lambda q, k, v, a, b, c: atj.dot_product_attention(
        q, k, v, descale_q=a, descale_k=b, descale_v=c))(*codes, *descales)
    assert out.dtype == jnp.bfloat16
    deq = [c.astype(jnp.float32) * d for c, d in zip(codes, descales)]
    ref = reference(*deq)
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(ref), atol=6e-2, rtol=6e-2)


def test_plan_created_once_and_described():
    attntune.clear_plans()
    q, k, v = inputs(2, 256, 256, 8, 2, 64, jnp.bfloat16, seed=seed_for(5))
    fn = jax.jit(lambda q, k, v: atj.dot_product_attention(q, k, v, is_causal=True))
    fn(q, k, v).block_until_ready()
    assert attntune.cached_plans() == 1
    for _ in range(3):
        fn(q, k, v).block_until_ready()
    info = attntune.plan_info(q, k, v, is_causal=True)  # the same plan: no new entry
    assert attntune.cached_plans() == 1
    assert info.impl and info.choice in ("exact", "nearest", "default", "cudnn", "naive")
    assert info.shape == "b2.t256.s256.hq8.hkv2.d64.bf16.causal"
    print(info)


def test_jit_inside_larger_program_and_vmap():
    q, k, v = inputs(2, 64, 64, 4, 4, 64, jnp.bfloat16, seed=seed_for(9))

    @jax.jit
    def f(q, k, v):
        o = atj.dot_product_attention(q * 2, k, v)
        return atj.dot_product_attention(o, k, v) + 1

    ref = reference(reference(q * 2, k, v).astype(jnp.bfloat16), k, v) + 1
    np.testing.assert_allclose(np.asarray(f(q, k, v), np.float32), np.asarray(ref), atol=3e-2, rtol=3e-2)
    qs, ks, vs = (jnp.stack([x, x * 0.5]) for x in (q, k, v))
    out = jax.vmap(atj.dot_product_attention)(qs, ks, vs)
    np.testing.assert_allclose(np.asarray(out[1], np.float32), np.asarray(reference(q * 0.5, k * 0.5, v * 0.5)),
                               atol=2e-2, rtol=2e-2)


COMMAND_BUFFER_SCRIPT = r"""
import jax, jax.numpy as jnp, numpy as np
import attntune.jax as atj
import os
rng = np.random.default_rng(int(os.environ["ATTNTUNE_CASE_SEED"]))
q, k, v = (jnp.asarray(rng.standard_normal((2, 128, 8, 64)), jnp.bfloat16) for _ in range(3))
f = jax.jit(lambda q, k, v: atj.dot_product_attention(q, k, v, is_causal=True) * 2 + 1)
ref = jax.nn.dot_product_attention(*(x.astype(jnp.float32) for x in (q, k, v)), is_causal=True) * 2 + 1
for i in range(4):  # later runs replay the captured graph
    out = f(q * (i + 1) / (i + 1), k, v)
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(ref), atol=5e-2, rtol=5e-2)
print("command buffer ok")
"""


def test_inside_xla_command_buffers():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL"
                        " --xla_gpu_graph_min_graph_size=1").strip()
    env["ATTNTUNE_CASE_SEED"] = str(seed_for("command buffers"))
    r = subprocess.run([sys.executable, "-c", COMMAND_BUFFER_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "command buffer ok" in r.stdout


def test_time_against_the_c_plan():
    """The JAX call against at_plan_benchmark of the same plan (printed; pytest -s shows it)."""
    b, t, n, h = 2, 4096, 16, 128
    q, k, v = inputs(b, t, t, n, n, h, jnp.bfloat16, seed=seed_for(1))
    fn = jax.jit(lambda q, k, v: atj.dot_product_attention(q, k, v, is_causal=True))
    out = fn(q, k, v).block_until_ready()
    reps = 50
    for _ in range(10):
        out = fn(q, k, v)
    out.block_until_ready()
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn(q, k, v)
    out.block_until_ready()
    jax_ms = (time.perf_counter() - t0) * 1e3 / reps

    shape = _common.make_shape(batch=b, q_len=t, kv_len=t, q_heads=n, kv_heads=n, head_dim=h,
                               dtype="bf16", mask=1, scale=None)
    plan = ctypes.c_void_p()
    _lib.check_py(_lib.py.atpy_plan_get(q.devices().pop().id, shape, _common.bshd_layout(shape), b"",
                                        _lib.encode(_common.resolve_db(None)), ctypes.byref(plan)))
    o = jnp.zeros_like(q)
    lay = _common.bshd_layout(shape)
    tensors = _lib.Tensors(q=q.unsafe_buffer_pointer(), k=k.unsafe_buffer_pointer(),
                           v=v.unsafe_buffer_pointer(), o=o.unsafe_buffer_pointer(), lse=None,
                           q_stride=lay.q, k_stride=lay.k, v_stride=lay.v, o_stride=lay.o)
    c_ms = ctypes.c_double()
    _lib.check_core(_lib.core.at_plan_benchmark(plan, ctypes.byref(tensors), None, 10, reps,
                                                ctypes.byref(c_ms)), "at_plan_benchmark")
    info = attntune.describe(plan, shape)
    flops = 4.0 * b * n * t * t * h / 2
    print(f"\n{info.shape} {info.impl}: JAX call {jax_ms:.4f} ms ({flops / jax_ms / 1e9:.1f} TFLOP/s), "
          f"C at_plan_benchmark {c_ms.value:.4f} ms ({flops / c_ms.value / 1e9:.1f} TFLOP/s), "
          f"ratio {jax_ms / c_ms.value:.3f}")
    assert jax_ms < 1.5 * c_ms.value + 0.1


@pytest.mark.parametrize("causal,bottom_right,kv_heads", [(False, False, 8), (True, False, 2), (True, True, 1)])
def test_varlen_matches_jax_nn_per_sequence(causal, bottom_right, kv_heads):
    seed = seed_for(("jax-varlen", causal, bottom_right, kv_heads))
    rng = np.random.default_rng(seed)
    lengths_q = [int(x) for x in rng.integers(1, 300, 5)] + [1]
    lengths_k = [n + int(rng.integers(0, 64)) for n in lengths_q]
    n, h = 8, 64
    q = jnp.asarray(rng.standard_normal((sum(lengths_q), n, h), np.float32), jnp.bfloat16)
    k = jnp.asarray(rng.standard_normal((sum(lengths_k), kv_heads, h), np.float32), jnp.bfloat16)
    v = jnp.asarray(rng.standard_normal((sum(lengths_k), kv_heads, h), np.float32), jnp.bfloat16)
    cu_q = np.concatenate([[0], np.cumsum(lengths_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lengths_k)]).astype(np.int32)
    fn = jax.jit(lambda q, k, v, a, b: atj.varlen_attention(
        q, k, v, a, b, max(lengths_q), max(lengths_k), is_causal=causal,
        causal_alignment="bottom_right" if bottom_right else "top_left"))
    out = np.asarray(fn(q, k, v, jnp.asarray(cu_q), jnp.asarray(cu_k)).astype(jnp.float32))
    refs = [np.asarray(reference(q[None, cu_q[b]:cu_q[b + 1]], k[None, cu_k[b]:cu_k[b + 1]],
                                 v[None, cu_k[b]:cu_k[b + 1]], is_causal=causal, bottom_right=bottom_right)[0])
            for b in range(len(lengths_q))]
    ref = np.concatenate(refs)
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert err < TOL[jnp.bfloat16], f"relative error {err:.3g} (seed {seed})"


# t = 40: a prefill chunk into the paged cache (the paged prefill kernels: fa3's on sm_90a; 1..16
# run the decode family)
@pytest.mark.parametrize("t,page_size,cache", [(1, 16, jnp.bfloat16), (4, 32, jnp.bfloat16), (1, 16, jnp.float8_e4m3fn),
                                              (40, 16, jnp.bfloat16)])
def test_paged_matches_jax_nn_on_gathered_pages(t, page_size, cache):
    seed = seed_for(("jax-paged", t, page_size, jnp.dtype(cache).name))
    rng = np.random.default_rng(seed)
    b, n, k_heads, h, max_k = 3, 32, 8, 128, 700
    lengths = [int(x) for x in rng.integers(t, max_k + 1, b)]
    max_pages = -(-max_k // page_size)
    num_pages = b * max_pages + 5
    table = rng.permutation(num_pages)[: b * max_pages].reshape(b, max_pages).astype(np.int32)  # shuffled
    kc = jnp.asarray(rng.standard_normal((num_pages, page_size, k_heads, h), np.float32), cache)
    vc = jnp.asarray(rng.standard_normal((num_pages, page_size, k_heads, h), np.float32), cache)
    q = jnp.asarray(rng.standard_normal((b, t, n, h), np.float32), jnp.bfloat16)
    extra = {"descale_k": 1.0, "descale_v": 1.0} if cache != jnp.bfloat16 else {}
    out = atj.paged_attention(q, kc, vc, jnp.asarray(table), jnp.asarray(np.array(lengths, np.int32)), max_k,
                              is_causal=t > 1, **extra)
    out = np.asarray(out.astype(jnp.float32))
    refs = []
    for i in range(b):
        pages = table[i, : -(-lengths[i] // page_size)]
        kk = kc[pages].astype(jnp.float32).reshape(-1, k_heads, h)[: lengths[i]]
        vv = vc[pages].astype(jnp.float32).reshape(-1, k_heads, h)[: lengths[i]]
        refs.append(np.asarray(reference(q[i:i + 1], kk[None], vv[None], is_causal=t > 1, bottom_right=True)[0]))
    ref = np.stack(refs)
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert err < 2e-2, f"relative error {err:.3g} (seed {seed})"
