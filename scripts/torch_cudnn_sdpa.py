#!/usr/bin/env python3
"""torch_cudnn_sdpa.py — an independent cross-check of cuDNN attention speed through PyTorch's
cuDNN SDPA backend, timed the way tests/bench_cudnn.c times ours (warm-up, back-to-back launches
with an event between each two, median; run twice). Not a dependency of attntune: a yardstick
for `bench_cudnn` on the same machine at the same moment.

usage: python3 scripts/torch_cudnn_sdpa.py   (B=2, Nq=16, T=S=8192, bf16, BSHD views)
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_ms(fn, warmup=5, reps=30):
    for _ in range(warmup):
        fn()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    events[0].record()
    for i in range(reps):
        fn()
        events[i + 1].record()
    torch.cuda.synchronize()
    ms = sorted(events[i].elapsed_time(events[i + 1]) for i in range(reps))
    return (ms[reps // 2 - 1] + ms[reps // 2]) / 2


def main():
    b, h, t = 2, 16, 8192
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    print(f"{'D':>4} {'mask':<7} {'time_ms':>9} {'again':>8} {'TFLOP/s':>8}")
    for d, causal in [(128, False), (128, True), (64, False), (256, False)]:
        # BSHD storage seen as [B, H, T, D], as attntune passes it to cuDNN
        q, k, v = (torch.empty(b, t, h, d, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1).transpose(1, 2)
                   for _ in range(3))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            first, again = median_ms(run), median_ms(run)
        flops = 4.0 * b * h * t * t * d / (2 if causal else 1)
        print(f"{d:>4} {'causal' if causal else 'none':<7} {first:9.3f} {again:8.3f} {flops / first / 1e9:8.1f}")
        del q, k, v


if __name__ == "__main__":
    main()
