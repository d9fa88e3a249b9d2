#!/usr/bin/env python3
"""The decoder's fp32 matrix products at decoding shapes, one thread: ATen's linear (MKL addmm,
what `normlab translate` runs) against the two prepacked-weight paths that ship in the same
PyTorch wheel, oneDNN (`torch.ops.mkldnn._linear_pointwise`, the weight reordered once, what
model/linear.h's PackedWeights runs) and MKL's packed GEMM (`torch.ops.mkl._mkl_linear`, float32
only). It asks whether a decoder could gain by
packing its weights once per translation (docs/performance.md, decoding on the AVX2 EPYC).

Rows M are decoder rows (sentences x beam); shapes are the d 256, FFN 1024, V 8000 model's:
q/out projections (256->256), stacked k/v (256->512), FFN (256->1024, 1024->256) and the output
projection (256->8000, no bias). Prints ms per product (median of --repeats timings of a loop)
and each path's largest difference from ATen's result.
"""
import argparse

import torch

from timing import median_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="500,100,20", help="comma list of M (decoder rows)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                    help="operands' dtype (bfloat16: what `--precision bf16` multiplies in)")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    shapes = [(256, 256, True), (256, 512, True), (256, 1024, True), (1024, 256, True), (256, 8000, False)]
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.dtype}; ms per product, median of {args.repeats}")
    aten = "ATen linear (MKL)" if dtype == torch.float32 else "ATen linear (oneDNN, weight reordered per call)"
    print(f"| M | K -> N | {aten} | GFLOP/s | oneDNN prepacked | / ATen | MKL packed | / ATen |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for m in (int(r) for r in args.rows.split(",")):
        for k, n, has_bias in shapes:
            x, w = torch.randn(m, k).to(dtype), (torch.randn(n, k) * 0.05).to(dtype)
            b = torch.randn(n).to(dtype) if has_bias else None
            ref = torch.nn.functional.linear(x, w, b)
            loops = max(3, int(2e8 / (2 * m * k * n)))
            t_aten = median_ms(lambda: torch.nn.functional.linear(x, w, b), args.repeats, loops, warmup=3)
            w_dnnl = torch.ops.mkldnn._reorder_linear_weight(w, m)
            dnnl = lambda: torch.ops.mkldnn._linear_pointwise(x, w_dnnl, b, "none", [], "")  # noqa: E731
            assert (dnnl().float() - ref.float()).abs().max().item() < tol, "oneDNN's result differs from ATen's"
            t_dnnl = median_ms(dnnl, args.repeats, loops, warmup=3)
            mkl_cells = "- | - |"  # MKL's packed GEMM is float32 only
            if dtype == torch.float32:
                w_mkl = torch.ops.mkl._mkl_reorder_linear_weight(w, m)
                mkl = lambda: torch.ops.mkl._mkl_linear(x, w_mkl, w, b, m)  # noqa: E731
                assert (mkl() - ref).abs().max().item() < tol, "MKL's packed result differs from ATen's"
                t_mkl = median_ms(mkl, args.repeats, loops, warmup=3)
                mkl_cells = f"{t_mkl:.3f} | {t_aten / t_mkl:.2f}x |"
            print(f"| {m} | {k} -> {n} | {t_aten:.3f} | {2 * m * k * n / t_aten / 1e6:.1f} | {t_dnnl:.3f} | "
                  f"{t_aten / t_dnnl:.2f}x | {mkl_cells}")


if __name__ == "__main__":
    main()
