#!/usr/bin/env python3
"""Why the decoder cache was made dense in 622ee7e (docs/performance.md; since 9897c80 it keeps
each position's keys and values where the step wrote them, read through a row table by a fused
kernel, model/kernels/attention_step.h, so neither layout below is used now): attention's two
batched products of a decoding step over keys and values whose rows are strided by a capacity
(the old (N, H, capacity, D) buffer) against the same data dense (N, H, positions, D); and the
step's gather into a buffer with room for one more position, as `index_select` into the strided
view against a plain copy of the same bytes. One thread, ms per call, medians.
"""
import argparse

import torch

from timing import median_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000, help="decoder rows N (sentences x beam)")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--positions", type=int, default=20, help="cached positions")
    ap.add_argument("--capacity", type=int, default=64, help="the strided layout's capacity")
    ap.add_argument("--layers", type=int, default=3, help="decoder layers (the gather moves 2 x layers)")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    N, H, D, L = args.rows, args.heads, args.head_dim, args.positions
    print(f"torch {torch.__version__}, 1 thread; N={N} H={H} D={D} positions={L} capacity={args.capacity}")
    print("| dtype | q kT strided | q kT dense | p v strided | p v dense | gather: index_select into "
          "strided positions | gather: copy of the same bytes | cache MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for dtype in (torch.float32, torch.bfloat16):
        buf = torch.randn(N, H, args.capacity, D).to(dtype)
        k = buf[:, :, :L].reshape(N * H, L, D)  # a view: rows strided by capacity x D
        kd = k.contiguous()
        q, p = torch.randn(N * H, 1, D).to(dtype), torch.softmax(torch.randn(N * H, 1, L), -1).to(dtype)
        assert torch.equal(torch.bmm(q, k.transpose(1, 2)), torch.bmm(q, kd.transpose(1, 2)))
        cells = [median_ms(f, args.repeats, 5, warmup=2) for f in (
            lambda: torch.bmm(q, k.transpose(1, 2)), lambda: torch.bmm(q, kd.transpose(1, 2)),
            lambda: torch.bmm(p, k), lambda: torch.bmm(p, kd))]
        G = 2 * args.layers  # every layer's keys and values, gathered together
        src = torch.randn(G, N, H, L, D).to(dtype)
        out = torch.empty(G, N, H, L + 1, D, dtype=dtype)
        rows = torch.randint(0, N, (N,))
        gather = lambda: torch.index_select(src, 1, rows, out=out.narrow(3, 0, L))  # noqa: E731
        flat_src, flat_out = src.view(-1), torch.empty(src.numel(), dtype=dtype)
        cells += [median_ms(gather, args.repeats, 2, warmup=2),
                  median_ms(lambda: flat_out.copy_(flat_src), args.repeats, 2, warmup=2)]
        mb = src.numel() * src.element_size() / 1e6
        print(f"| {str(dtype).replace('torch.', '')} | " + " | ".join(f"{c:.2f}" for c in cells) + f" | {mb:.0f} |")


if __name__ == "__main__":
    main()
