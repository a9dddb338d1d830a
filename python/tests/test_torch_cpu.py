"""CPU tests of attntune.torch: the custom op's schema and fake implementation, argument errors."""

import pytest
import torch

import attntune
import attntune.torch as att


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def test_op_is_registered():
    op = torch.ops.attntune.sdpa.default
    assert "attntune::sdpa" in str(op._schema)


@pytest.mark.parametrize("kv_heads", [8, 2, 1])
def test_fake_implementation_shapes(kv_heads):
    q, k = meta(2, 8, 128, 64), meta(2, kv_heads, 96, 64)
    out = att.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
    assert out.shape == (2, 8, 128, 64) and out.dtype == torch.bfloat16 and out.device.type == "meta"
    # (B, N, T, H) view of a (B, T, N, H) buffer
    assert out.stride() == (128 * 8 * 64, 64, 8 * 64, 1)


def test_fake_tensor_mode_and_fp8():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q = torch.empty(1, 4, 64, 128, dtype=torch.float8_e4m3fn)
        d = torch.ones(1)
        out = att.scaled_dot_product_attention(q, q, q, descale_q=d, descale_k=d, descale_v=d)
        assert out.dtype == torch.bfloat16 and out.shape == (1, 4, 64, 128)


def test_compile_traces_through_fake():
    # torch.compile's fake tensor pass must go through the fake implementation without running it.
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    with FakeTensorMode():
        q = torch.empty(2, 8, 64, 64, dtype=torch.float16)
        g = make_fx(lambda q: att.scaled_dot_product_attention(q, q, q))(q)
    assert "attntune.sdpa" in g.code


def test_unsupported_arguments_are_named():
    q = meta(1, 2, 8, 64)
    with pytest.raises(attntune.UnsupportedArgumentError, match="attn_mask"):
        att.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool))
    with pytest.raises(attntune.UnsupportedArgumentError, match="dropout_p"):
        att.scaled_dot_product_attention(q, q, q, dropout_p=0.1)


def test_argument_errors():
    q = meta(1, 8, 16, 64)
    with pytest.raises(ValueError, match="enable_gqa"):
        att.scaled_dot_product_attention(q, meta(1, 2, 16, 64), meta(1, 2, 16, 64))
    with pytest.raises(ValueError, match="not a multiple"):
        att.scaled_dot_product_attention(q, meta(1, 3, 16, 64), meta(1, 3, 16, 64), enable_gqa=True)
    with pytest.raises(ValueError, match="one shape"):
        att.scaled_dot_product_attention(q, q, meta(1, 8, 16, 32))
    with pytest.raises(TypeError, match="one dtype"):
        att.scaled_dot_product_attention(q, q, meta(1, 8, 16, 64, dtype=torch.float16))
    with pytest.raises(ValueError, match="FP8"):
        att.scaled_dot_product_attention(q, q, q, descale_q=torch.ones(1))
    with pytest.raises(ValueError, match=r"\(B, N, T, H\)"):
        att.scaled_dot_product_attention(meta(16, 64), meta(16, 64), meta(16, 64))


def test_cpu_tensors_are_refused_clearly():
    q = torch.zeros(1, 2, 8, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="CUDA device"):
        att.scaled_dot_product_attention(q, q, q)


def test_torch_compile_fullgraph_traces_without_breaks():
    # Dynamo must trace the wrapper in one graph (no ctypes there); the op then runs for real and
    # refuses the CPU tensors.
    f = torch.compile(lambda q: att.scaled_dot_product_attention(q, q, q, is_causal=True) * 2,
                      fullgraph=True, backend="eager")
    with pytest.raises(ValueError, match="CUDA device"):
        f(torch.zeros(1, 2, 16, 64, dtype=torch.bfloat16))


# ---- serving layouts: varlen and paged (argument checks and fake implementations) -------------

def cu(*lengths, device="meta"):
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    return torch.tensor(offsets, dtype=torch.int32).to(device)


def test_serving_ops_are_registered():
    assert "attntune::varlen" in str(torch.ops.attntune.varlen.default._schema)
    assert "attntune::paged" in str(torch.ops.attntune.paged.default._schema)


def test_varlen_fake_shape():
    q, k = meta(37, 8, 64), meta(50, 2, 64)
    out = att.varlen_attention(q, k, k, cu(10, 27), cu(20, 30), 27, 30, is_causal=True)
    assert out.shape == (37, 8, 64) and out.dtype == torch.bfloat16 and out.device.type == "meta"


def test_paged_fake_shape_and_fp8_cache():
    q = meta(3, 1, 32, 128)
    cache = meta(40, 16, 8, 128)
    table = torch.zeros(3, 8, dtype=torch.int32, device="meta")
    lengths = torch.zeros(3, dtype=torch.int32, device="meta")
    out = att.paged_attention(q, cache, cache, table, lengths, 128)
    assert out.shape == (3, 1, 32, 128) and out.dtype == torch.bfloat16
    c8 = meta(40, 16, 8, 128, dtype=torch.float8_e4m3fn)
    d = torch.ones(1, device="meta")
    out = att.paged_attention(q, c8, c8, table, lengths, 128, descale_k=d, descale_v=d)
    assert out.shape == (3, 1, 32, 128) and out.dtype == torch.bfloat16


def test_varlen_argument_errors():
    q, k = meta(37, 8, 64), meta(50, 2, 64)
    with pytest.raises(ValueError, match="cu_seqlens_q must be an int32"):
        att.varlen_attention(q, k, k, cu(10, 27).long(), cu(20, 30), 27, 30)
    with pytest.raises(ValueError, match=r"cu_seqlens_k must have shape \(3,\)"):
        att.varlen_attention(q, k, k, cu(10, 27), cu(50), 27, 50)
    with pytest.raises(ValueError, match="max_seqlen_q must be a positive int"):
        att.varlen_attention(q, k, k, cu(10, 27), cu(20, 30), 0, 30)
    with pytest.raises(ValueError, match="one shape"):
        att.varlen_attention(q, k, meta(50, 2, 32), cu(10, 27), cu(20, 30), 27, 30)
    with pytest.raises(ValueError, match=r"\(total, heads, head_dim\)"):
        att.varlen_attention(meta(1, 37, 8, 64), k, k, cu(10, 27), cu(20, 30), 27, 30)
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        att.varlen_attention(q.float(), k.float(), k.float(), cu(10, 27), cu(20, 30), 27, 30)
    with pytest.raises(ValueError, match="causal_alignment"):
        att.varlen_attention(q, k, k, cu(10, 27), cu(20, 30), 27, 30, is_causal=True, causal_alignment="x")
    with pytest.raises(ValueError, match="not a multiple"):
        att.varlen_attention(q, meta(50, 3, 64), meta(50, 3, 64), cu(10, 27), cu(20, 30), 27, 30)


def test_paged_argument_errors():
    q = meta(3, 1, 32, 128)
    cache = meta(40, 16, 8, 128)
    table = torch.zeros(3, 8, dtype=torch.int32, device="meta")
    lengths = torch.zeros(3, dtype=torch.int32, device="meta")
    with pytest.raises(ValueError, match="page size 8"):
        att.paged_attention(q, meta(40, 8, 8, 128), meta(40, 8, 8, 128), table, lengths, 64)
    with pytest.raises(ValueError, match="too few for max_seqlen_k 200"):
        att.paged_attention(q, cache, cache, table, lengths, 200)
    with pytest.raises(ValueError, match=r"seqlens_k must have shape \(3,\)"):
        att.paged_attention(q, cache, cache, table, lengths[:2], 128)
    with pytest.raises(ValueError, match="block_table must be an int32"):
        att.paged_attention(q, cache, cache, table.long(), lengths, 128)
    with pytest.raises(ValueError, match="only apply to an FP8 KV cache"):
        att.paged_attention(q, cache, cache, table, lengths, 128, descale_k=torch.ones(1, device="meta"))
    with pytest.raises(TypeError, match="the query's dtype"):
        att.paged_attention(q, cache.half(), cache.half(), table, lengths, 128)
    with pytest.raises(ValueError, match="one shape and dtype"):
        att.paged_attention(q, cache, meta(40, 16, 4, 128), table, lengths, 128)
