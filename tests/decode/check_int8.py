#!/usr/bin/env python3
"""ctest driver: `normlab translate --precision int8` against the independent PyTorch beam search
of check_beam.py over reference_model.py, whose every nn.Linear (attention projections, FFN,
output projection) is replaced here by the int8 scheme of docs/precision.md written from that
page alone with PyTorch's quantisation functions:

- weights: torch.quantize_per_channel to qint8 with scale max |w_n| / 127 per output row,
  dequantised;
- activations: each row divided by its max |x| (in float32, as normlab's activations are), then
  quantised to uint8 with the scale and zero point that torch._choose_qparams_per_tensor gives
  the range [-1, 1] (its reduce_range, 7-bit steps, without AVX-512 VNNI), dequantised;
- the product of the two in float64, times the row's max |x|, plus the bias.

The reference model runs in float64 otherwise, one sentence at a time (the scheme is per row, so
normlab's batching must not matter). Every hypothesis' tokens must be equal and its score within
TOLERANCE: float32 against float64 arithmetic moves an activation across a rounding boundary now
and then (one step of 2/255 of its row's max), which moved scores by up to 2.5e-3 (pre-ln) and
1.9e-3 (post-ln) here. That is not far below what int8 itself does to this tiny model (the int8
reference differs from the float one by up to 0.098 and 0.016), so the scores must also be, on
average, at least FP32_MARGIN times closer to the int8 reference than to the float reference
(over the hypotheses whose tokens the two references share).
"""

import argparse
import random
import sys
from pathlib import Path

import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
from check_beam import VOCAB, parse_translate_output, run, translation_beam_search  # noqa: E402
from reference_model import ReferenceTransformer, load_weights  # noqa: E402

LENGTHS = [5, 0, 1, 8, 3, 7, 6, 2]  # source lengths; 0 is an empty line
CASES = [(1, 1.0), (5, 1.0), (5, 0.6)]  # (beam, lenpen)
MAX_LEN_B = 12
TOLERANCE = 1e-2  # on scores (mean log p in nats)
FP32_MARGIN = 4
warnings.filterwarnings("ignore", message=".*quantize_per_channel.*")  # deprecated, used on purpose


def vnni():
    return "avx512_vnni" in Path("/proc/cpuinfo").read_text()


def int8_forward(layer, reduce_range):
    """The forward of nn.Linear `layer` with int8 weights and per-row int8 activations."""
    w = layer.weight.detach().float()
    amax = w.abs().amax(1)
    scales = torch.where(amax > 0, amax / 127, torch.ones_like(amax)).double()
    q = torch.quantize_per_channel(w, scales, torch.zeros(len(scales), dtype=torch.long), 0, torch.qint8)
    w_deq = q.dequantize().double()
    scale, zero_point = torch._choose_qparams_per_tensor(torch.tensor([-1.0, 1.0]), reduce_range)
    bias = layer.bias.detach().double() if layer.bias is not None else None

    def forward(x):
        rows = x.reshape(-1, x.shape[-1]).float()
        norm = rows.abs().amax(1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
        q_x = (torch.round(rows / norm / scale) + zero_point).clamp(0, 255)  # uint8 (also with reduce_range)
        y = F.linear((q_x - zero_point).double() * scale, w_deq) * norm.double()
        if bias is not None:
            y = y + bias
        return y.reshape(*x.shape[:-1], -1).to(x.dtype)

    return forward


def make_int8(model, reduce_range):
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.forward = int8_forward(module, reduce_range)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--normlab", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--scheme", default="pre-ln")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    checkpoint, weights, src_path = (args.workdir / n for n in ("model.ckpt", "weights.pt", "src.ids"))
    run([args.normlab, "init", "--scheme", args.scheme, "--d-model", 32, "--ffn-dim", 64, "--heads", 2,
         "--encoder-layers", 2, "--decoder-layers", 2, "--vocab-size", VOCAB, "--share", "all",
         "--seed", 13, "--out", checkpoint])
    run([args.normlab, "export", "--checkpoint", checkpoint, "--out", weights])
    rng = random.Random(7)
    sources = [[rng.randrange(4, VOCAB) for _ in range(n)] for n in LENGTHS]
    src_path.write_text("".join(" ".join(map(str, s)) + "\n" for s in sources))
    state, config = load_weights(weights)
    models = {}
    for name in ("fp32", "int8"):
        model = ReferenceTransformer(config).double().eval()
        model.load_state_dict(state, strict=True)
        models[name] = make_int8(model, not vnni()) if name == "int8" else model

    failures, compared, int8_effect, worst = [], 0, 0.0, 0.0
    to_int8, to_fp32 = [], []  # |score - reference| for hypotheses both references share
    for beam, lenpen in CASES:
        out = run([args.normlab, "translate", "--checkpoint", checkpoint, "--ids", "--input", src_path,
                   "--beam", beam, "--nbest", beam, "--lenpen", lenpen, "--max-len-b", MAX_LEN_B,
                   "--max-tokens", 12, "--scores", "--threads", 1, "--precision", "int8"])
        got = parse_translate_output(out, len(sources), beam)
        for i, src in enumerate(sources):
            if not src:
                if got[i]:
                    failures.append(f"line {i + 1} is empty but got {got[i]}")
                continue
            case = f"beam {beam} lenpen {lenpen} line {i + 1}"
            expected = translation_beam_search(models["int8"], src, beam, lenpen, 0.0, MAX_LEN_B)
            fp32 = translation_beam_search(models["fp32"], src, beam, lenpen, 0.0, MAX_LEN_B)
            int8_effect = max([int8_effect] + [abs(e[1] - f[1]) for e, f in zip(expected, fp32)])
            for (tokens, s), e, f in zip(got[i], expected, fp32):
                if tokens == e[0] == f[0]:
                    to_int8.append(abs(s - e[1]))
                    to_fp32.append(abs(s - f[1]))
            if [h[0] for h in got[i]] != [h[0] for h in expected]:
                failures.append(f"{case}: normlab {got[i]}\n    reference {expected}")
                continue
            for (_, s), (_, r) in zip(got[i], expected):
                worst = max(worst, abs(s - r))
                if abs(s - r) > TOLERANCE:
                    failures.append(f"{case}: score {s!r}, reference {r!r}")
            compared += len(expected)
    mean_int8, mean_fp32 = (sum(d) / max(len(d), 1) for d in (to_int8, to_fp32))
    if not to_int8 or mean_int8 * FP32_MARGIN > mean_fp32:
        failures.append(f"over {len(to_int8)} hypotheses the scores are {mean_int8:.2e} from the int8 reference "
                        f"and {mean_fp32:.2e} from the float one on average: not {FP32_MARGIN}x closer to int8")
    if failures:
        print(f"FAIL (largest score difference {worst:.1e}, mean {mean_int8:.1e}; from fp32 {mean_fp32:.1e}; int8 "
              f"reference against fp32 {int8_effect:.3f}):\n  " +
              "\n  ".join(failures))
        sys.exit(1)
    print(f"OK: {compared} hypotheses (tokens, and scores within {worst:.1e} <= {TOLERANCE}) equal the int8 "
          f"reference over {len(CASES)} settings; mean score difference {mean_int8:.1e} from the int8 reference, "
          f"{mean_fp32:.1e} from the float one; int8 moves the reference's scores by up to {int8_effect:.3f}")


if __name__ == "__main__":
    main()
