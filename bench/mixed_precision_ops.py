#!/usr/bin/env python3
"""Element-wise costs that decide how mixed precision is built (docs/precision.md,
docs/performance.md): matrix-product rates of fp32, bf16 and fp16 at a Transformer shape, and
an fp32 + bf16 add against casting first. One process, medians of --repeats, --threads threads.

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


if __name__ == "__main__":
    main()
