"""GPU tests of attntune.torch against torch SDPA on fresh random inputs (masks, GQA/MQA,
layouts, FP8, streams) and torch.library.opcheck. Skipped without a GPU visible to torch."""

import pytest

from conftest import needs_torch_gpu, seed_for

pytestmark = [pytest.mark.gpu, needs_torch_gpu]

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import attntune  # noqa: E402
import attntune.torch as att  # noqa: E402

TOL = {torch.bfloat16: 2e-2, torch.float16: 5e-3, torch.float32: 2e-3}


def inputs(b, t, s, n, k, h, dtype, seed, layout="bnth"):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if layout == "btnh":  # (B, T, N, H) memory seen as (B, N, T, H): JAX's layout, no copy
        make = lambda length, heads: torch.randn(b, length, heads, h, device="cuda", generator=g,  # noqa: E731
                                                 dtype=torch.float32).to(dtype).transpose(1, 2)
    else:
        make = lambda length, heads: torch.randn(b, heads, length, h, device="cuda", generator=g,  # noqa: E731
                                                 dtype=torch.float32).to(dtype)
    return make(t, n), make(s, k), make(s, k)


def reference(q, k, v, *, is_causal=False, bottom_right=False, scale=None):
    q, k, v = (x.float() for x in (q, k, v))
    t, s = q.shape[2], k.shape[2]
    gqa = k.shape[1] != q.shape[1]
    if is_causal and bottom_right:
        mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=gqa)


CASES = [
    # b, t, s, n, k, h, dtype, causal, bottom_right, layout
    (2, 128, 128, 8, 8, 64, torch.bfloat16, False, False, "bnth"),
    (2, 256, 256, 8, 2, 64, torch.bfloat16, True, False, "bnth"),
    (1, 100, 77, 8, 1, 128, torch.bfloat16, False, False, "btnh"),
    (2, 64, 192, 8, 2, 128, torch.float16, True, False, "btnh"),
    (2, 16, 300, 8, 2, 64, torch.bfloat16, True, True, "bnth"),
    (1, 333, 333, 4, 4, 64, torch.float16, True, False, "bnth"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"b{c[0]}t{c[1]}s{c[2]}n{c[3]}k{c[4]}h{c[5]}"
                         f"{str(c[6])[6:]}{'-causal' if c[7] else ''}{'-br' if c[8] else ''}-{c[9]}")
def test_matches_torch_sdpa(case):
    b, t, s, n, k, h, dtype, causal, br, layout = case
    q, kk, v = inputs(b, t, s, n, k, h, dtype, seed=seed_for(case), layout=layout)
    out = att.scaled_dot_product_attention(q, kk, v, is_causal=causal, enable_gqa=k != n,
                                           causal_alignment="bottom_right" if br else "top_left")
    ref = reference(q, kk, v, is_causal=causal, bottom_right=br)
    assert out.dtype == dtype and out.shape == q.shape
    torch.testing.assert_close(out.float(), ref, atol=TOL[dtype], rtol=TOL[dtype])


def test_non_contiguous_head_dim_is_copied():
    q, k, v = inputs(1, 64, 64, 4, 4, 64, torch.bfloat16, seed=seed_for(2))
    qs = torch.cat([q, q], dim=-1)[..., ::2]  # stride 2 along H
    out = att.scaled_dot_product_attention(qs, k, v)
    torch.testing.assert_close(out.float(), reference(qs, k, v), atol=2e-2, rtol=2e-2)


def test_runs_on_the_current_stream():
    q, k, v = inputs(2, 512, 512, 8, 8, 64, torch.bfloat16, seed=seed_for(4))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = att.scaled_dot_product_attention(q, k, v, is_causal=True)
        out2 = out * 1  # queued after the attention on the same stream
    side.synchronize()
    torch.testing.assert_close(out2.float(), reference(q, k, v, is_causal=True), atol=2e-2, rtol=2e-2)


def test_fp8_with_descales():
    q, k, v = inputs(1, 128, 128, 4, 4, 128, torch.float32, seed=seed_for(6))
    fmax = torch.finfo(torch.float8_e4m3fn).max
    codes, descales = [], []
    for x in (q, k, v):
        scale = fmax / x.abs().max()
        codes.append((x * scale).to(torch.float8_e4m3fn))
        descales.append((1.0 / scale).reshape(1).float())
    out = att.scaled_dot_product_attention(*codes, descale_q=descales[0], descale_k=descales[1],
                                           descale_v=descales[2])
    assert out.dtype == torch.bfloat16
    deq = [c.float() * d for c, d in zip(codes, descales)]
    torch.testing.assert_close(out.float(), reference(*deq), atol=6e-2, rtol=6e-2)


def test_opcheck():
    q, k, v = inputs(2, 128, 128, 8, 2, 64, torch.bfloat16, seed=seed_for(8))
    torch.library.opcheck(torch.ops.attntune.sdpa.default, (q, k, v, None, None, None, 1, 0.0, "", ""))
    qt, kt, vt = inputs(1, 64, 96, 4, 4, 64, torch.float16, seed=seed_for(9), layout="btnh")
    torch.library.opcheck(torch.ops.attntune.sdpa.default, (qt, kt, vt, None, None, None, 0, 0.125, "", ""))


def test_torch_compile_fullgraph():
    q, k, v = inputs(2, 128, 128, 8, 8, 64, torch.bfloat16, seed=seed_for(10))
    f = torch.compile(lambda q, k, v: att.scaled_dot_product_attention(q, k, v, is_causal=True) * 2,
                      fullgraph=True)
    torch.testing.assert_close(f(q, k, v).float(), reference(q, k, v, is_causal=True) * 2,
                               atol=4e-2, rtol=4e-2)


def test_plan_info_matches_the_op():
    attntune.clear_plans()
    q, k, v = inputs(1, 256, 256, 8, 8, 64, torch.bfloat16, seed=seed_for(12))
    att.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert attntune.cached_plans() == 1
    info = attntune.plan_info(q, k, v, is_causal=True, layout="BNTH")
    assert attntune.cached_plans() == 1, "plan_info made another plan than the op's"
    print(info)
