#!/usr/bin/env python3
"""The int8 candidates for decoding (issue 34 §6) at the decoder's shapes, one thread, against the
float products normlab runs today. Every int8 path uses symmetric per-output-row weight scales
(CTranslate2's int8: scale = 127 / max |row|); they differ in what happens to the activations:

- fbgemm dynamic: `quantized::linear_dynamic` on a per-channel qint8 weight packed by
  `quantized::linear_prepack` (the fbgemm engine): activations quantised to uint8 with ONE
  scale and zero point for the whole (M, K) input, int8 products, float output.
- fbgemm dynamic, 7-bit: the same with `reduce_range` (activations in 0..127, what
  torch.ao's dynamic Linear passes: without AVX-512 VNNI fbgemm's u8 x s8 pairs are summed in
  saturating int16, which 0..255 can overflow).
- normlab int8: what `--precision int8` runs (model/int8_linear.h): fbgemm dynamic on x divided
  by each row's max |x| plus a sentinel row (1, -1, 0, ...) that fixes the input's range to
  [-1, 1], so that its one scale is every row's whatever the batch; the product multiplied back
  per row and the bias added (ATen's `addcmul`).
- int8 weight only: `aten::_weight_int8pack_mm`: the int8 weight dequantised inside the kernel,
  float activations and float arithmetic.
- per-row int8: CTranslate2's scheme built from ATen ops: activations quantised per row
  (symmetric, 127 / max |row|), `aten::_int_mm` (int8 x int8 -> int32, oneDNN), then the int32
  result times the row scale and the weight's column scale, plus the bias. "_int_mm alone" is
  the product without the quantisation and rescaling around it.
- fbgemm per-tensor: `fbgemm_linear_int8_weight_fp32_activation` (deprecated; one scale for the
  whole weight, so not a candidate, timed for comparison).

Rows M are decoder rows (sentences x beam: 5 is one sentence at beam 5 or five greedy ones,
320 a large beam-5 batch); shapes are the d 256, FFN 1024, V 8000 model's. Prints ms per product
(median of --repeats timings of a loop) and, per path, the largest error against the float32
product relative to the largest |y|.
"""
import argparse
import warnings

import torch

from timing import median_ms

warnings.filterwarnings("ignore")  # the quantized-tensor and fbgemm_* deprecation warnings


def row_scales(t):
    """CTranslate2's symmetric int8 scale per row: max |row| / 127 (a zero row gets scale 1)."""
    s = t.abs().amax(1) / 127
    return torch.where(s > 0, s, torch.ones_like(s))


def quantise_rows(t, s):
    return torch.round(t / s[:, None]).clamp(-127, 127).to(torch.int8)


def candidates(x, w, b, m):
    """name -> a callable computing (M, N) float32 from x (M, K), w (N, K), b (N) or None."""
    n = w.shape[0]
    sw = row_scales(w)
    wq = quantise_rows(w, sw)
    w_t = wq.t()  # (K, N) view of the (N, K) int8 weight: _int_mm's second operand
    w_dnnl = torch.ops.mkldnn._reorder_linear_weight(w, m)
    w_bf16 = torch.ops.mkldnn._reorder_linear_weight(w.bfloat16(), m)
    b_bf16 = b.bfloat16() if b is not None else None
    q = torch.quantize_per_channel(w, sw.double(), torch.zeros(n, dtype=torch.long), 0, torch.qint8)
    torch.backends.quantized.engine = "fbgemm"
    packed = torch.ops.quantized.linear_prepack(q, b)
    packed_no_bias = torch.ops.quantized.linear_prepack(q, None)
    wt, col_offsets, ws, wz = torch.fbgemm_linear_quantize_weight(w)
    fb_packed = torch.fbgemm_pack_quantized_matrix(wt)
    xq_fixed = quantise_rows(x, row_scales(x))

    def per_row():
        sx = row_scales(x)
        y = torch._int_mm(quantise_rows(x, sx), w_t) * sw  # int32 * float -> float, one pass
        y.mul_(sx[:, None])
        return y.add_(b) if b is not None else y

    def normlab_int8():  # as model/int8_linear.cpp, op for op
        sx = x.abs().amax(1, keepdim=True).clamp_min_(torch.finfo(torch.float32).tiny)
        scaled = torch.empty(m + 1, x.shape[1])
        torch.div(x, sx, out=scaled[:m])
        scaled[m].zero_()
        scaled[m, :2] = torch.tensor([1.0, -1.0])
        y = torch.ops.quantized.linear_dynamic(scaled, packed_no_bias, False)[:m]
        return torch.addcmul(b, y, sx) if b is not None else y.mul_(sx)

    def weight_only():
        y = torch._weight_int8pack_mm(x, wq, sw)
        return y.add_(b) if b is not None else y

    return {
        "fp32 ATen linear": lambda: torch.nn.functional.linear(x, w, b),
        "fp32 oneDNN packed": lambda: torch.ops.mkldnn._linear_pointwise(x, w_dnnl, b, "none", [], ""),
        "bf16 oneDNN packed": lambda: torch.ops.mkldnn._linear_pointwise(x.bfloat16(), w_bf16, b_bf16, "none", [], "").float(),
        "fbgemm dynamic": lambda: torch.ops.quantized.linear_dynamic(x, packed, False),
        "fbgemm dynamic, 7-bit": lambda: torch.ops.quantized.linear_dynamic(x, packed, True),
        "normlab int8": normlab_int8,
        "int8 weight only": weight_only,
        "per-row int8": per_row,
        "_int_mm alone": lambda: torch._int_mm(xq_fixed, w_t),
        "fbgemm per-tensor": lambda: torch.fbgemm_linear_int8_weight_fp32_activation(
            x, w, fb_packed, col_offsets, ws, wz, b if b is not None else torch.zeros(n)),
    }


def row_error(y, ref):
    return ((y - ref).abs().amax(1) / ref.abs().amax(1)).max().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="5,20,100,320", help="comma list of M (decoder rows)")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--row-spread", type=float, default=0.0,
                    help="rows of x scaled by exp(N(0, s^2)): rows of unequal size (per-tensor scales lose there)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s), engines {torch.backends.quantized.supported_engines}; "
          f"ms per product, median of {args.repeats}; (error) = max over rows of max |y - y_fp32| / max |y_fp32|")
    shapes = [(256, 256, True), (256, 1024, True), (1024, 256, True), (256, args.vocab, False)]
    header = None
    for m in (int(r) for r in args.rows.split(",")):
        for k, n, has_bias in shapes:
            # LayerNorm'd activations (a few larger columns, rows optionally of unequal size) and
            # trained-like weights (std 0.05).
            x = torch.randn(m, k)
            x[:, :4] *= 8
            x *= torch.exp(torch.randn(m, 1) * args.row_spread)
            w, b = torch.randn(n, k) * 0.05, (torch.randn(n) * 0.1 if has_bias else None)
            ref = torch.nn.functional.linear(x, w, b)
            paths = candidates(x, w, b, m)
            if header is None:
                header = list(paths)
                print("| M | K -> N | " + " | ".join(header) + " |")
                print("|---:|---|" + "---:|" * len(header))
            loops = max(3, int(1e8 / (2 * m * k * n)))
            cells = []
            for name in header:
                f = paths[name]
                t = median_ms(f, args.repeats, loops, warmup=3)
                err = "" if name == "_int_mm alone" else f" ({row_error(f().float(), ref):.0e})"
                cells.append(f"{t:.3f}{err}")
            print(f"| {m} | {k} -> {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
