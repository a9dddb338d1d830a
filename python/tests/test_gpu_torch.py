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


# ---- serving layouts against torch SDPA per sequence ---------------------------------------------

def _sdpa_one(q, k, v, causal, bottom_right):
    """q (T, N, H), k/v (S, K, H) -> (T, N, H) in float32 through torch SDPA; rows with no key 0."""
    t, s = q.shape[0], k.shape[0]
    out = torch.zeros(t, q.shape[1], q.shape[2], device=q.device)
    if t == 0 or s == 0:
        return out
    qq, kk, vv = (x.float().transpose(0, 1).unsqueeze(0) for x in (q, k, v))
    gqa = kk.shape[1] != qq.shape[1]
    if causal:
        mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t if bottom_right else 0)
        o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, enable_gqa=gqa)
        o = torch.where(mask.any(-1)[None, None, :, None], o, torch.zeros_like(o))  # rows with no key
    else:
        o = F.scaled_dot_product_attention(qq, kk, vv, enable_gqa=gqa)
    return o[0].transpose(0, 1)


@pytest.mark.parametrize("causal,bottom_right,dtype,kv_heads", [
    (False, False, torch.bfloat16, 8), (True, False, torch.bfloat16, 2), (True, True, torch.float16, 2),
    (True, False, torch.float16, 1)])
def test_varlen_matches_sdpa_per_sequence(causal, bottom_right, dtype, kv_heads):
    seed = seed_for(("varlen", causal, bottom_right, str(dtype), kv_heads))
    g = torch.Generator().manual_seed(seed)
    lengths_q = [int(x) for x in torch.randint(1, 300, (5,), generator=g)] + [0, 1]
    lengths_k = [n + int(torch.randint(0, 64, (1,), generator=g)) for n in lengths_q]
    n, h = 8, 64
    total_q, total_k = sum(lengths_q), sum(lengths_k)
    gd = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(total_q, n, h, device="cuda", generator=gd).to(dtype)
    k = torch.randn(total_k, kv_heads, h, device="cuda", generator=gd).to(dtype)
    v = torch.randn(total_k, kv_heads, h, device="cuda", generator=gd).to(dtype)
    cu_q = torch.tensor([0] + list(torch.tensor(lengths_q).cumsum(0)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(torch.tensor(lengths_k).cumsum(0)), dtype=torch.int32, device="cuda")
    out = att.varlen_attention(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), is_causal=causal,
                               causal_alignment="bottom_right" if bottom_right else "top_left")
    assert out.shape == q.shape and out.dtype == dtype
    ref = torch.cat([_sdpa_one(q[cu_q[b]:cu_q[b + 1]], k[cu_k[b]:cu_k[b + 1]], v[cu_k[b]:cu_k[b + 1]],
                               causal, bottom_right) for b in range(len(lengths_q))])
    err = ((out.float() - ref).norm() / ref.norm()).item()
    assert err < TOL[dtype], f"relative error {err:.3g} (seed {seed})"


# t = 40: a prefill chunk into the paged cache (the paged prefill kernels: fa3's on sm_90a; 1..16
# run the decode family)
@pytest.mark.parametrize("t,page_size,cache_dtype", [(1, 16, torch.bfloat16), (4, 32, torch.bfloat16),
                                                     (1, 16, torch.float8_e4m3fn), (40, 16, torch.bfloat16)])
def test_paged_matches_sdpa_on_gathered_pages(t, page_size, cache_dtype):
    seed = seed_for(("paged", t, page_size, str(cache_dtype)))
    g = torch.Generator().manual_seed(seed)
    b, n, k_heads, h, max_k = 3, 32, 8, 128, 700
    lengths = [int(x) for x in torch.randint(t, max_k + 1, (b,), generator=g)]
    max_pages = -(-max_k // page_size)
    num_pages = b * max_pages + 5
    perm = torch.randperm(num_pages, generator=g)  # pages handed out shuffled
    table = perm[: b * max_pages].reshape(b, max_pages).to(torch.int32).cuda()
    gd = torch.Generator(device="cuda").manual_seed(seed)
    kc = torch.randn(num_pages, page_size, k_heads, h, device="cuda", generator=gd)
    vc = torch.randn(num_pages, page_size, k_heads, h, device="cuda", generator=gd)
    kc, vc = kc.to(cache_dtype), vc.to(cache_dtype)
    q = torch.randn(b, t, n, h, device="cuda", generator=gd).to(torch.bfloat16)
    extra = {}
    if cache_dtype != torch.bfloat16:
        one = torch.ones(1, device="cuda")
        extra = {"descale_k": one, "descale_v": one}
    out = att.paged_attention(q, kc, vc, table, torch.tensor(lengths, dtype=torch.int32, device="cuda"), max_k,
                              is_causal=t > 1, **extra)
    assert out.shape == q.shape and out.dtype == torch.bfloat16
    refs = []
    for i in range(b):
        pages = table[i, : -(-lengths[i] // page_size)].long()
        k = kc[pages].float().reshape(-1, k_heads, h)[: lengths[i]]
        v = vc[pages].float().reshape(-1, k_heads, h)[: lengths[i]]
        refs.append(_sdpa_one(q[i], k, v, t > 1, True))
    ref = torch.stack(refs)
    err = ((out.float() - ref).norm() / ref.norm()).item()
    assert err < 2e-2, f"relative error {err:.3g} (seed {seed})"


def test_bad_metadata_is_named_when_checked():
    q = torch.randn(30, 8, 64, device="cuda").to(torch.bfloat16)
    k = torch.randn(40, 2, 64, device="cuda").to(torch.bfloat16)
    cu_q = torch.tensor([0, 20, 10, 30], dtype=torch.int32, device="cuda")  # decreasing
    cu_k = torch.tensor([0, 10, 30, 40], dtype=torch.int32, device="cuda")
    out = att.varlen_attention(q, k, k, cu_q, cu_k, 20, 20)  # unchecked: runs, reads nothing outside
    assert torch.isfinite(out.float()).all()
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        att.varlen_attention(q, k, k, cu_q, cu_k, 20, 20, check_metadata=True)
    cache = torch.randn(8, 16, 2, 64, device="cuda").to(torch.bfloat16)
    table = torch.tensor([[0, 1], [2, 99]], dtype=torch.int32, device="cuda")  # 99: past the pool
    lengths = torch.tensor([20, 30], dtype=torch.int32, device="cuda")
    qd = torch.randn(2, 1, 8, 64, device="cuda").to(torch.bfloat16)
    with pytest.raises(ValueError, match="block_table"):
        att.paged_attention(qd, cache, cache, table, lengths, 32, check_metadata=True)
