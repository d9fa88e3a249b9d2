#!/usr/bin/env python3
"""Convert a normlab export (`normlab export --out DIR/weights.pt`: weights.pt + weights.json)
into a CTranslate2 model directory, losslessly, for the plain schemes post-ln and pre-ln.

    python3 bench/ct2_convert.py --weights DIR/weights.pt --output_dir CT2_DIR [--quantization int8] [--force] [--check 32]
    python3 bench/ct2_convert.py --normlab build/normlab --checkpoint CKPT --output_dir CT2_DIR

Written from CTranslate2's own fairseq converter (ctranslate2/converters/fairseq.py), which
maps the same parameter names; what it takes from fairseq's model objects is read here from
weights.json and checked against what CTranslate2 can express:

- architecture: TransformerSpec.from_config((encoder_layers, decoder_layers), heads,
  pre_norm=True for pre/plain (Pre-LN, with the final encoder and decoder LayerNorms),
  False for post/plain (Post-LN, LN(x + f(x)), no final LayerNorm), activation ReLU.
  Other schemes (Admin's omega, DeepNorm's alpha, ReZero, no-LN T-Fixup) have no
  equivalent in TransformerSpec and are refused;
- embeddings: `scale_embeddings` = sqrt(C) (weights.json `embed_scale`, checked);
- positions: fairseq's sinusoidal table ([sin | cos], freq_i = exp(-i ln(10000)/(half-1)),
  computed in float64 like normlab, stored in float32) written explicitly as
  `position_encodings`, starting at row `position_offset` (= pad + 1 = 2), so that the
  token at index t gets P[t + 2]. CTranslate2's built-in table would use P[t + 1];
- attention: q/k/v fused for self-attention, k/v fused for encoder attention (as the
  fairseq converter does); CTranslate2 scales q k^T by 1/sqrt(D) like normlab;
- shared tables (`share_embeddings` all/decoder): the same array is set for each use;
  CTranslate2 stores equal variables once (aliases);
- LayerNorm eps: `layer_norm_epsilon` = weights.json `layer_norm_eps` (1e-5); CTranslate2's
  default would also be 1e-5 with a beta, but it is written explicitly;
- tokens: the vocabulary is the list of id strings with fairseq's specials at 0-3
  (`<s>`, `<pad>`, `</s>`, `<unk>`, then "4", "5", ...), so a token id round-trips exactly
  (`ids_to_tokens` / `tokens_to_ids` below). Source: `add_source_eos` (normlab appends `</s>`), no
  source BOS; the decoder starts from `</s>` (`decoder_start_token`). Padding: fairseq and
  normlab give padded positions a zero vector, CTranslate2 masks them by length; either way
  they never reach a real token.

Decoding options that reproduce `normlab translate` are in `ct2_translate_options` (beam,
lenpen over the length counting `</s>`, patience 1, min/max decoding length, nothing masked);
its docstring lists what cannot match: a hypothesis cut at the max length is scored without
log p(</s>), and CTranslate2 masks tokens (</s> before min_len; <s>/<pad>/<unk> if asked) on
the logits, which renormalises the remaining log-probabilities.

`--check N` scores N random id pairs teacher-forced with CTranslate2 (float32) and with
tests/reference's PyTorch model and prints the largest log-probability difference.
"""
import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile

# Only the standard library at import time: bench/decode.py's CTranslate2 worker imports the
# token helpers below and must not load PyTorch (ctranslate2.specs and the reference do).
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # fairseq ids 0..3 (docs/conventions.md "Tokens")
SCHEMES = {("post", "plain"): False, ("pre", "plain"): True}  # -> pre_norm


def id_tokens(vocab_size):
    """The CTranslate2 vocabulary: token i is the string of i, specials at 0-3."""
    return SPECIALS + [str(i) for i in range(len(SPECIALS), vocab_size)]


def ids_to_tokens(ids):
    return [SPECIALS[i] if i < len(SPECIALS) else str(i) for i in ids]


def tokens_to_ids(tokens):
    return [SPECIALS.index(t) if t in SPECIALS else int(t) for t in tokens]


def ct2_translate_options(beam, lenpen, max_len, min_len, mask_specials=False):
    """translate_batch keyword arguments matching `normlab translate --beam B --lenpen L
    --min-len N` with max_len = a * src_len + b output tokens, `</s>` not counted (a must be 0:
    CTranslate2 has one maximum per call, not one per sentence).

    - length_penalty: CTranslate2 divides the summed log-probability by len^lenpen with the
      `</s>` counted (include_eos_in_hypotheses is always on inside; return_end_token only
      strips it from the output), as fairseq and normlab do; patience 1 stops a sentence at
      `beam` finished hypotheses, fairseq's early stop. With length_penalty exactly 0
      CTranslate2 would instead stop as soon as the top beam ends, so lenpen 0 is passed as
      1e-30 (len^1e-30 is 1.0 in float32: the same scores, fairseq's stopping rule);
    - min_decoding_length = min_len: `</s>` masked while step < min_len, as in normlab, but
      CTranslate2 masks the logit before the log_softmax (normlab masks the log-probability
      after it), so the other tokens' log-probabilities at those steps gain
      -log(1 - p(</s>)): the same constant for every hypothesis of a sentence, which leaves
      the ranking alone at lenpen 0 and shifts it by c / len^lenpen otherwise (an untrained
      model with p(</s>) = 0.74 at step 0 picks differently at lenpen 0.6; the trained
      Multi30k model has p(</s>) <= 0.002 there);
    - max_decoding_length = max_len: steps 0..max_len-1, the last keeps its best candidates
      whatever they are. normlab (fairseq) runs one more step allowing only `</s>`: the same
      token sequences (at most max_len tokens), but a hypothesis cut at the cap is scored
      without log p(</s>) and with length max_len instead of max_len + 1. Greedy output is
      identical; a beam can pick differently among capped hypotheses. (max_len + 1 would
      allow max_len + 1 tokens.)
    - `<s>`, `<pad>`, `<unk>`: normlab sets their log-probabilities to -inf after the
      log_softmax; CTranslate2's disable_unk / suppress_sequences set their logits to -inf
      before it, which renormalises every other log-probability (scores shift by
      -log(1 - p(<s>) - p(<pad>) - p(<unk>)) per step, enough to change beams of an untrained
      model). So by default nothing is masked: scores are normlab's exactly, and CTranslate2
      could emit one of those tokens where normlab would not (a trained model gives them
      next to no probability). mask_specials=True masks them CTranslate2's way instead.
    - max_input_length 0: no truncation of the source (default 1024 tokens)."""
    options = dict(beam_size=beam, length_penalty=lenpen if lenpen != 0 else 1e-30, patience=1.0, num_hypotheses=1,
                   max_decoding_length=max_len, min_decoding_length=min_len,
                   return_end_token=False, max_input_length=0)
    if mask_specials:
        options.update(disable_unk=True, suppress_sequences=[["<s>"], ["<pad>"]])
    return options


def check_config(config):
    """Refuse, with the reason, what CTranslate2's TransformerSpec cannot express."""
    problems = []
    if config.get("format") != "normlab-weights":
        problems.append(f"not a normlab export (format {config.get('format')!r})")
    model, scheme = config["model"], config["scheme"]
    key = (scheme["norm"], scheme["residual"])
    if key not in SCHEMES:
        problems.append(
            f"scheme norm={key[0]} residual={key[1]} (init {scheme.get('init')}) cannot be converted: "
            "only post-ln (post/plain) and pre-ln (pre/plain) have a CTranslate2 equivalent "
            "(TransformerSpec has no Admin omega, DeepNorm alpha, ReZero alpha or LayerNorm-free layers)")
    if scheme["norm"] == "post" and scheme["residual"] == "plain" and \
            (scheme.get("encoder_alpha", 1.0) != 1.0 or scheme.get("decoder_alpha", 1.0) != 1.0):
        problems.append("post/plain with a residual alpha != 1")
    if config["special_tokens"] != {"bos": 0, "pad": 1, "eos": 2, "unk": 3}:
        problems.append(f"special tokens {config['special_tokens']} are not fairseq's bos 0 pad 1 eos 2 unk 3")
    if config["decoder_start_token"] != config["special_tokens"]["eos"]:
        problems.append("decoder start token is not </s>")
    if not config["source_append_eos"]:
        problems.append("source without </s>")
    if config["position_offset"] != config["special_tokens"]["pad"] + 1:
        problems.append(f"position offset {config['position_offset']} is not pad + 1")
    if not math.isclose(config["embed_scale"], math.sqrt(model["d_model"]), rel_tol=1e-12):
        problems.append(f"embed_scale {config['embed_scale']} is not sqrt(d_model)")
    if model["d_model"] % model["heads"]:
        problems.append("d_model not divisible by heads")
    if problems:
        sys.exit("ct2_convert: cannot convert: " + "; ".join(problems))


def build_spec(weights):
    """weights.pt (+ weights.json) -> a filled ctranslate2 TransformerSpec (not yet validated)."""
    import reference_model as ref
    from ctranslate2.converters import utils
    from ctranslate2.specs import common_spec, transformer_spec

    state, config = ref.load_weights(weights)
    check_config(config)
    model = config["model"]
    pre_norm = SCHEMES[(config["scheme"]["norm"], config["scheme"]["residual"])]
    spec = transformer_spec.TransformerSpec.from_config(
        (model["encoder_layers"], model["decoder_layers"]), model["heads"],
        pre_norm=pre_norm, activation=common_spec.Activation.RELU)
    offset, dim = config["position_offset"], model["d_model"]
    # Row p of fairseq's table is position p; the token at index t has position t + offset.
    positions = ref.sinusoidal_table(model["max_positions"] + offset, dim)[offset:].float().numpy()

    def f32(name):
        return state[name].detach().float().numpy()

    def linear(s, name, bias=True):
        s.weight = f32(name + ".weight")
        if bias:
            s.bias = f32(name + ".bias")

    def layer_norm(s, name):
        s.gamma, s.beta = f32(name + ".weight"), f32(name + ".bias")

    def fused(s, prefix, names):
        parts = [common_spec.LinearSpec() for _ in names]
        for part, name in zip(parts, names):
            linear(part, f"{prefix}.{name}")
        utils.fuse_linear(s, parts)

    def attention(s, prefix, self_attention):
        if self_attention:
            fused(s.linear[0], prefix, ("q_proj", "k_proj", "v_proj"))
        else:
            linear(s.linear[0], prefix + ".q_proj")
            fused(s.linear[1], prefix, ("k_proj", "v_proj"))
        linear(s.linear[-1], prefix + ".out_proj")

    def ffn(s, prefix):
        layer_norm(s.layer_norm, prefix + ".final_layer_norm")  # the FFN block's LN
        linear(s.linear_0, prefix + ".fc1")
        linear(s.linear_1, prefix + ".fc2")

    def inputs(s, side):
        table = s.embeddings[0] if isinstance(s.embeddings, list) else s.embeddings
        table.weight = f32(f"{side}.embed_tokens.weight")  # aliases of a shared table included
        s.scale_embeddings = True  # sqrt(d_model), checked against embed_scale
        s.position_encodings.encodings = positions
        if pre_norm:
            layer_norm(s.layer_norm, f"{side}.layer_norm")

    inputs(spec.encoder, "encoder")
    for i, s in enumerate(spec.encoder.layer):
        p = f"encoder.layers.{i}"
        attention(s.self_attention, p + ".self_attn", True)
        layer_norm(s.self_attention.layer_norm, p + ".self_attn_layer_norm")
        ffn(s.ffn, p)
    inputs(spec.decoder, "decoder")
    spec.decoder.projection.weight = f32("decoder.output_projection.weight")  # no bias
    for i, s in enumerate(spec.decoder.layer):
        p = f"decoder.layers.{i}"
        attention(s.self_attention, p + ".self_attn", True)
        layer_norm(s.self_attention.layer_norm, p + ".self_attn_layer_norm")
        attention(s.attention, p + ".encoder_attn", False)
        layer_norm(s.attention.layer_norm, p + ".encoder_attn_layer_norm")
        ffn(s.ffn, p)

    spec.register_source_vocabulary(id_tokens(model["src_vocab_size"]))
    spec.register_target_vocabulary(id_tokens(model["tgt_vocab_size"]))
    c = spec.config
    c.bos_token, c.eos_token, c.unk_token = "<s>", "</s>", "<unk>"
    c.decoder_start_token = "</s>"
    c.add_source_bos, c.add_source_eos = False, True
    c.layer_norm_epsilon = float(config["layer_norm_eps"])
    return spec


def convert(weights, output_dir, quantization=None, force=False):
    """What ctranslate2.converters.Converter.convert does, for a normlab export."""
    if os.path.exists(output_dir) and not force:
        sys.exit(f"ct2_convert: {output_dir} exists (--force replaces it)")
    spec = build_spec(weights)
    spec.validate()
    spec.optimize(quantization=quantization)  # aliases equal (shared) tables; quantizes if asked
    if os.path.exists(output_dir):
        shutil.rmtree(output_dir)
    os.makedirs(output_dir)
    spec.save(output_dir)
    return output_dir


def check(weights, ct2_dir, sentences=32, seed=0):
    """Teacher-forced log-probabilities of random id pairs from CTranslate2's score_batch
    (float32, one thread) against the PyTorch reference over the same weights.pt: returns
    the largest absolute difference per target token (`</s>` included)."""
    import ctranslate2
    import torch
    import reference_model as ref
    state, config = ref.load_weights(weights)
    model = ref.ReferenceTransformer(config).eval()
    model.load_state_dict(state)
    gen = torch.Generator().manual_seed(seed)

    def sentence(vocab):
        return torch.randint(4, vocab, (int(torch.randint(1, 30, (1,), generator=gen)),), generator=gen).tolist()

    pairs = [(sentence(config["model"]["src_vocab_size"]), sentence(config["model"]["tgt_vocab_size"]))
             for _ in range(sentences)]
    translator = ctranslate2.Translator(ct2_dir, device="cpu", compute_type="float32", intra_threads=1)
    scored = translator.score_batch([ids_to_tokens(x) for x, _ in pairs], [ids_to_tokens(y) for _, y in pairs])
    worst = 0.0
    with torch.no_grad():
        for (x, y), r in zip(pairs, scored):
            src, prev, tgt = ref.make_batch([x], [y])
            lp = torch.log_softmax(model(src, prev).double(), -1)[0].gather(-1, tgt[0].unsqueeze(-1))[:, 0]
            worst = max(worst, (lp - torch.tensor(r.log_probs, dtype=torch.float64)).abs().max().item())
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", help="weights.pt from `normlab export` (weights.json beside it)")
    ap.add_argument("--checkpoint", help="a normlab checkpoint instead (exported with --normlab first)")
    ap.add_argument("--normlab", default=os.path.join(HERE, "..", "build", "normlab"))
    ap.add_argument("--output_dir", required=True, help="CTranslate2 model directory to write")
    ap.add_argument("--quantization", default=None,
                    help="weight type stored (int8, int16, float16, bfloat16, ...; default: float32 as exported). "
                         "CTranslate2 also converts at load time (compute_type)")
    ap.add_argument("--force", action="store_true", help="replace an existing --output_dir")
    ap.add_argument("--check", type=int, default=0, metavar="N",
                    help="then score N random id pairs with CTranslate2 (float32) and the PyTorch reference and "
                         "print the largest log-probability difference")
    args = ap.parse_args()
    if bool(args.weights) == bool(args.checkpoint):
        sys.exit("ct2_convert: give --weights or --checkpoint")
    weights = args.weights
    if args.checkpoint:
        weights = os.path.join(tempfile.mkdtemp(prefix="normlab_ct2_"), "weights.pt")
        subprocess.run([args.normlab, "export", "--checkpoint", args.checkpoint, "--out", weights], check=True)
    out = convert(weights, args.output_dir, args.quantization, args.force)
    print(f"ct2_convert: {out}")
    if args.check:
        print(f"ct2_convert: {args.check} random pairs, max |log p(CTranslate2) - log p(reference)| = "
              f"{check(weights, out, args.check):.3g}")


if __name__ == "__main__":
    main()
