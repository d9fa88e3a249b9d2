#!/usr/bin/env python3
"""Element-wise costs that decide how mixed precision is built (docs/precision.md,
docs/performance.md): matrix-product rates of fp32, bf16 and fp16 at a Transformer shape, and
an fp32 + bf16 add against casting first, and the training step's attention in bf16 composed
(as normlab runs it) against PyTorch's fused scaled_dot_product_attention. One process, medians
of --repeats, --threads threads.

  python3 bench/mixed_precision_ops.py --threads 2
"""
import argparse

import torch

from timing import median_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    m, k, n = 4096, 512, 1024
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        ms = median_ms(lambda: a @ b, args.repeats)
        print(f"mm {m}x{k}x{n} {dtype}: {2 * m * k * n / ms / 1e6:.0f} GFLOP/s")
    x, y = torch.randn(128, 32, 512), torch.randn(128, 32, 512).bfloat16()
    print(f"add fp32 + bf16 (128x32x512): {median_ms(lambda: x + y, args.repeats):.2f} ms; "
          f"cast then add: {median_ms(lambda: x + y.float(), args.repeats):.2f} ms; "
          f"fp32 + fp32: {median_ms(lambda: x + x, args.repeats):.2f} ms")
    attention(args.repeats)


def attention(repeats):
    """Forward + backward of bench/train_step.py's attention (iwslt-small: 128 sentences, 4 heads
    of 128, 32 positions) in bf16 with key padding and causal masks."""
    b, h, t, d = 128, 4, 32, 128
    q, k, v = (torch.randn(b, h, t, d, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    blocked = torch.zeros(b, 1, 1, t, dtype=torch.bool)
    blocked[:, :, :, t - 4:] = True
    blocked = blocked | torch.ones(t, t, dtype=torch.bool).triu(1)
    bias = torch.zeros(b, 1, t, t, dtype=torch.bfloat16).masked_fill(blocked, float("-inf"))

    def composed():  # model/attention.cpp: scores, masks, softmax in fp32, weighted values
        scores = torch.matmul(q, k.transpose(-2, -1)).masked_fill(blocked, float("-inf"))
        return torch.matmul(torch.softmax(scores.float(), -1).bfloat16(), v)

    def fused():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0)

    def forward_backward(f):
        out = f()
        torch.autograd.grad(out, (q, k, v), torch.ones_like(out))

    print(f"attention {b}x{h}x{t}x{d} bf16, forward + backward: composed "
          f"{median_ms(lambda: forward_backward(composed), repeats):.2f} ms, "
          f"scaled_dot_product_attention {median_ms(lambda: forward_backward(fused), repeats):.2f} ms")


if __name__ == "__main__":
    main()
