#!/usr/bin/env python3
"""Decoding speed of `normlab translate` against a PyTorch beam search with a key/value cache
over the same exported model (the peer), side by side in one run.

The source file is encoded once to token ids (`normlab bpe encode --ids`); both sides then
decode the same ids with the same beam, lenpen and max length, batched by source tokens
(--max-tokens), each in its own fresh process with the same intra-op thread count, runs
alternating (normlab, peer, normlab, ...); medians of the decode time each side measures
itself (model loading excluded) are reported as sentences/s. The peer is written here from
fairseq's SequenceGenerator (incremental decoding, beam reordering by index_select, finished
sentences dropped from the batch) on tests/reference's modules, and its translations are
compared with normlab's (they must agree but for float ties).

--lengths L1,L2,...: decode time at forced output lengths (min_len = max_len = L, so every
hypothesis has exactly L tokens) for the linear-growth check; time per output token is printed.
--no-cache-lengths L1,...: the peer once more without its cache (the whole prefix through the
decoder every step), the cost incremental decoding avoids.

--sides picks what runs, round robin in that order (default normlab,peer):
  normlab        `normlab translate` (fp32)
  normlab-bf16   `normlab translate --precision bf16`
  normlab-int8   `normlab translate --precision int8` (int8 weights, per-row scales: docs/precision.md)
  peer           the PyTorch beam search above
  ct2-TYPE       CTranslate2 (pip ctranslate2) with compute_type TYPE (float32, int8, int8_float32,
                 int16, bfloat16 where this CPU build supports it) over the same export converted
                 by bench/ct2_convert.py (float32 weights; CTranslate2 converts at load time),
                 intra_threads = --threads, inter_threads 1, the same batches as normlab
                 (token_batches), options from ct2_convert.ct2_translate_options. Its worker
                 process does not load PyTorch. Only translate_batch is timed.
  SIDE+malloc    the same with REFERENCE §6's MALLOC_* settings in its environment;
  ct2-TYPE+mask  CTranslate2 masking <s>/<pad>/<unk> (disable_unk, suppress_sequences), which
                 renormalises its log-probabilities (see ct2_convert.ct2_translate_options).
Each row reports how many output lines differ from normlab fp32 (the first side when
normlab is not run), of those how many reached the max length on normlab's side (where
CTranslate2 cannot match exactly: see bench/ct2_convert.py), and how many lines of that side
contain <s>, <pad> or <unk>.
"""
import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
if "--ct2-worker" not in sys.argv:  # CTranslate2's worker runs without PyTorch (and its libgomp) loaded
    import torch
    import reference_model as ref  # noqa: E402

BOS, PAD, EOS, UNK = 0, 1, 2, 3


class IncrementalPeer:
    """Step-wise decoder over ReferenceTransformer's modules: per layer self-attention K/V of
    earlier positions (concatenated each step) and encoder-attention K/V computed once."""

    def __init__(self, model):
        self.model = model
        self.dec = model.decoder

    def attend(self, mha, x, cache, key, static_kv, kv_source=None, blocked=None):
        q = mha._split_heads(mha.q_proj(x) / math.sqrt(mha.head_dim))  # (N,H,1,D)
        if static_kv:
            if key not in cache:
                cache[key] = (mha._split_heads(mha.k_proj(kv_source)), mha._split_heads(mha.v_proj(kv_source)))
            k, v = cache[key]
        else:
            k, v = mha._split_heads(mha.k_proj(x)), mha._split_heads(mha.v_proj(x))
            if key in cache:
                k, v = torch.cat([cache[key][0], k], 2), torch.cat([cache[key][1], v], 2)
            cache[key] = (k, v)
        scores = torch.matmul(q, k.transpose(-1, -2))
        if blocked is not None:
            scores = scores.masked_fill(blocked, float("-inf"))
        return mha.out_proj(torch.matmul(torch.softmax(scores, -1), v).transpose(1, 2).flatten(2))

    def step(self, tokens, position, enc_out, src_blocked, cache):
        """tokens (N,1) at `position` -> log-probabilities (N,V)."""
        d = self.dec
        x = d.embed_scale * d.embed_tokens(tokens) + d.positions[d.position_offset + position].to(enc_out.dtype)
        for i, layer in enumerate(d.layers):
            x = layer.block(x, lambda h: self.attend(layer.self_attn, h, cache, (i, "self"), False), "self_attn")
            x = layer.block(x, lambda h: self.attend(layer.encoder_attn, h, cache, (i, "enc"), True, enc_out,
                                                     src_blocked), "encoder_attn")
            x = layer.block(x, layer.feed_forward, "ffn")
        if hasattr(d, "layer_norm"):
            x = d.layer_norm(x)
        return torch.log_softmax(d.output_projection(x)[:, 0], dim=-1)


def reorder_cache(cache, index, enc_index):
    for key, (k, v) in list(cache.items()):
        if key[1] == "self":
            cache[key] = (k.index_select(0, index), v.index_select(0, index))
        elif enc_index is not None:
            cache[key] = (k.index_select(0, enc_index), v.index_select(0, enc_index))


def peer_beam_search(model, peer, src, beam, lenpen, max_len_a, max_len_b, min_len, max_positions,
                     no_cache=False):
    """fairseq's SequenceGenerator loop on one batch src (B,S). Returns the best hypothesis
    (token list) per row. `no_cache`: recompute the prefix every step instead."""
    bsz = src.size(0)
    src_blocked = ref.key_padding(src, PAD)
    enc_out = model.encoder(src, src_blocked)
    lengths = src.ne(PAD).sum(1).tolist()
    max_len = [min(int(max_len_a * n + max_len_b), max_positions - 1) for n in lengths]
    longest = max(max_len)
    rows = torch.arange(bsz).repeat_interleave(beam)
    enc_out, src_blocked = enc_out.index_select(0, rows), src_blocked.index_select(0, rows)
    V = model.decoder.output_projection.weight.size(0)
    tokens = torch.full((bsz * beam, longest + 2), PAD, dtype=torch.long)
    tokens[:, 0] = EOS
    scores = torch.zeros(bsz * beam, longest + 1, dtype=enc_out.dtype)
    ignore = torch.zeros(bsz, beam, dtype=torch.bool)
    active = list(range(bsz))
    finalized = [[] for _ in range(bsz)]
    cache = {}
    cand_size = 2 * beam
    for step in range(longest + 1):
        if no_cache:  # the whole prefix through the full decoder, every step (for comparison)
            lprobs = torch.log_softmax(model.decoder(tokens[:, :step + 1], enc_out, src_blocked)[:, -1], dim=-1)
        else:
            lprobs = peer.step(tokens[:, step:step + 1], step, enc_out, src_blocked, cache)
        lprobs[lprobs != lprobs] = -math.inf
        lprobs[:, [BOS, PAD, UNK]] = -math.inf
        force = torch.tensor([step >= max_len[s] for s in active]).repeat_interleave(beam)
        if force.any():
            eos = lprobs[:, EOS].clone()
            lprobs[force] = -math.inf
            lprobs[:, EOS] = eos
        if step < min_len:
            lprobs[:, EOS] = -math.inf
        n = len(active)
        lp = lprobs.view(n, beam, V)
        lp = lp[:, :1] if step == 0 else lp + scores[:, step - 1].view(n, beam, 1)
        flat = lp.reshape(n, -1)
        cand_scores, idx = flat.topk(min(cand_size, flat.size(1) - 1))
        cand_beams, cand_tokens = idx // V, idx % V
        offsets = (torch.arange(n) * beam).unsqueeze(1)
        eos_mask = cand_tokens.eq(EOS) & cand_scores.ne(-math.inf)
        eos_mask[:, :beam] &= ~ignore
        eos_rows = (cand_beams + offsets)[:, :beam][eos_mask[:, :beam]]
        if eos_rows.numel():
            eos_scores = cand_scores[:, :beam][eos_mask[:, :beam]] / (step + 1) ** lenpen
            hyp = tokens.index_select(0, eos_rows)[:, 1:step + 1]
            for r, s, t in zip(eos_rows.tolist(), eos_scores.tolist(), hyp.tolist()):
                f = finalized[active[r // beam]]
                if len(f) < beam:
                    f.append((s, t))
        keep = [i for i, s in enumerate(active) if len(finalized[s]) < beam and step < max_len[s]]
        if not keep:
            break
        old_offsets, enc_index = offsets, None
        if len(keep) < n:
            kb = torch.tensor(keep)
            row_keep = ((kb * beam).unsqueeze(1) + torch.arange(beam)).view(-1)
            eos_mask, cand_beams, cand_scores, cand_tokens, ignore = (
                t.index_select(0, kb) for t in (eos_mask, cand_beams, cand_scores, cand_tokens, ignore))
            tokens, scores = tokens.index_select(0, row_keep), scores.index_select(0, row_keep)
            enc_out, src_blocked = enc_out.index_select(0, row_keep), src_blocked.index_select(0, row_keep)
            old_offsets, enc_index = (kb * beam).unsqueeze(1), row_keep
            active = [active[i] for i in keep]
            n = len(keep)
            offsets = (torch.arange(n) * beam).unsqueeze(1)
        eos_mask[:, :beam] |= ignore
        active_mask = eos_mask.long() * cand_size + torch.arange(eos_mask.size(1))
        new_ignore, hypos = active_mask.topk(beam, 1, largest=False)
        ignore = new_ignore.ge(cand_size)
        active_beams = cand_beams.gather(1, hypos)
        new_rows = (active_beams + offsets).view(-1)
        tokens = tokens.index_select(0, new_rows)
        tokens[:, step + 1] = cand_tokens.gather(1, hypos).view(-1)
        scores = scores.index_select(0, new_rows)
        scores[:, step] = cand_scores.gather(1, hypos).view(-1)
        reorder_cache(cache, (active_beams + old_offsets).view(-1), enc_index)
    return [max(f, key=lambda h: h[0])[1] if f else [] for f in finalized]


def token_batches(sources, max_tokens):
    """Indices sorted by length, cut so that sentences * longest (with </s>) <= max_tokens."""
    order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: len(sources[i]))
    batches, batch, longest = [], [], 0
    for i in order:
        size = len(sources[i]) + 1
        if batch and (len(batch) + 1) * max(longest, size) > max_tokens:
            batches.append(batch)
            batch, longest = [], 0
        batch.append(i)
        longest = max(longest, size)
    return batches + ([batch] if batch else [])


def peer_main(args):
    torch.set_num_threads(args.threads)
    state, config = ref.load_weights(args.weights)
    model = ref.ReferenceTransformer(config).eval()
    model.load_state_dict(state)
    peer = IncrementalPeer(model)
    with open(args.ids) as f:
        sources = [[int(t) for t in line.split()] for line in f]
    out = [[] for _ in sources]
    t0 = time.perf_counter()
    for batch in token_batches(sources, args.max_tokens):
        longest = max(len(sources[i]) for i in batch) + 1
        src = torch.full((len(batch), longest), PAD, dtype=torch.long)
        for r, i in enumerate(batch):
            src[r, :len(sources[i]) + 1] = torch.tensor(sources[i] + [EOS])
        with torch.no_grad():
            hyps = peer_beam_search(model, peer, src, args.beam, args.lenpen, 0.0, args.max_len_b, args.min_len,
                                    config["model"]["max_positions"], args.no_cache)
        for i, h in zip(batch, hyps):
            out[i] = h
    secs = time.perf_counter() - t0
    with open(args.hyp_out, "w") as f:
        f.write("".join(" ".join(map(str, h)) + "\n" for h in out))
    print(json.dumps({"seconds": secs}))


def ct2_main(args):
    """CTranslate2 side: same ids, same batches as normlab; only translate_batch is timed."""
    import ctranslate2
    from ct2_convert import ct2_translate_options, ids_to_tokens, tokens_to_ids
    translator = ctranslate2.Translator(args.ct2_model, device="cpu", compute_type=args.compute_type,
                                        inter_threads=1, intra_threads=args.threads)
    with open(args.ids) as f:
        sources = [[int(t) for t in line.split()] for line in f]
    batches = token_batches(sources, args.max_tokens)
    inputs = [[ids_to_tokens(sources[i]) for i in batch] for batch in batches]
    options = ct2_translate_options(args.beam, args.lenpen, args.max_len_b, args.min_len, args.mask_specials)
    t0 = time.perf_counter()
    results = [translator.translate_batch(x, **options) for x in inputs]
    secs = time.perf_counter() - t0
    out = [[] for _ in sources]
    for batch, result in zip(batches, results):
        for i, r in zip(batch, result):
            out[i] = tokens_to_ids(r.hypotheses[0])
    with open(args.hyp_out, "w") as f:
        f.write("".join(" ".join(map(str, h)) + "\n" for h in out))
    print(json.dumps({"seconds": secs, "compute_type": translator.compute_type}))


MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "4294967296",
              "MALLOC_TOP_PAD_": "268435456"}  # ../shared/REFERENCE.md §6


def run(cmd, env=None):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       env=None if env is None else {**os.environ, **env})
    if r.returncode:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{r.stderr}")
    return r


def normlab_seconds(stderr):
    """`normlab translate` prints "... in X s: ..." on its last stderr line."""
    line = [l for l in stderr.splitlines() if l.startswith("normlab translate:")][-1]
    return float(line.split(" in ")[1].split(" s")[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--normlab")
    ap.add_argument("--checkpoint")
    ap.add_argument("--vocab", help="SentencePiece model of the checkpoint")
    ap.add_argument("--input", help="source text")
    ap.add_argument("--input-ids", help="source already as token ids, one sentence a line (instead of --input)")
    ap.add_argument("--sides", default="normlab,peer",
                    help="comma-separated: normlab, normlab-bf16, normlab-int8, peer, ct2-float32, ct2-int8, ...; "
                         "+malloc suffix")
    ap.add_argument("--beams", default="5,1")
    ap.add_argument("--lenpen", type=float, default=1.0)
    ap.add_argument("--max-len-b", type=int, default=200)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=0, help="first N lines only (0: all)")
    ap.add_argument("--lengths", default="", help="forced output lengths for the linear-growth check")
    ap.add_argument("--no-cache-lengths", default="",
                    help="also time the peer without its cache (prefix recomputed every step) at these forced lengths")
    ap.add_argument("--keep", help="keep the export, ids, CTranslate2 model and outputs in this folder")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ct2-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-cache", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--weights", help=argparse.SUPPRESS)
    ap.add_argument("--ct2-model", help=argparse.SUPPRESS)
    ap.add_argument("--compute-type", help=argparse.SUPPRESS)
    ap.add_argument("--mask-specials", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ids", help=argparse.SUPPRESS)
    ap.add_argument("--hyp-out", help=argparse.SUPPRESS)
    ap.add_argument("--beam", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--min-len", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer:
        return peer_main(args)
    if args.ct2_worker:
        return ct2_main(args)
    if not args.normlab or not args.checkpoint or not (args.input_ids or (args.input and args.vocab)):
        ap.error("--normlab, --checkpoint and --input with --vocab (or --input-ids) are required")

    sides = [x for x in args.sides.split(",") if x]
    for side in sides:
        name, *mods = side.split("+")
        if (name not in ("normlab", "normlab-bf16", "normlab-int8", "peer") and not name.startswith("ct2-")) or \
                set(mods) - {"malloc", "mask"} or ("mask" in mods and not name.startswith("ct2-")):
            ap.error(f"unknown side {side}")
    tmp = args.keep or tempfile.mkdtemp(prefix="normlab_decode_bench_")
    os.makedirs(tmp, exist_ok=True)
    weights, ids = os.path.join(tmp, "weights.pt"), os.path.join(tmp, "src.ids")
    checkpoint = os.path.join(tmp, "checkpoint.pt")  # a copy: training may replace the original mid-run
    if not os.path.exists(checkpoint) or not os.path.samefile(args.checkpoint, checkpoint):
        shutil.copyfile(args.checkpoint, checkpoint)
    run([args.normlab, "export", "--checkpoint", checkpoint, "--out", weights])
    with open(os.path.join(tmp, "weights.json")) as f:
        max_positions = json.load(f)["model"]["max_positions"]
    if args.input_ids:
        with open(args.input_ids) as f:
            lines = f.read().splitlines()
    else:
        lines = run([args.normlab, "bpe", "encode", "--model", args.vocab, "--input", args.input,
                     "--ids"]).stdout.splitlines()
    if args.sentences:
        lines = lines[:args.sentences]
    with open(ids, "w") as f:
        f.write("\n".join(lines) + "\n")
    n = len(lines)
    notes = []
    ct2_dir = os.path.join(tmp, "ct2")
    if any(x.startswith("ct2-") for x in sides):
        import ctranslate2
        from ct2_convert import convert
        convert(weights, ct2_dir, force=True)
        supported = ctranslate2.get_supported_compute_types("cpu")
        for side in list(sides):
            compute_type = side.split("+")[0][len("ct2-"):] if side.startswith("ct2-") else None
            if compute_type and compute_type not in supported:
                sides.remove(side)
                notes.append(f"{side} skipped: this CTranslate2 {ctranslate2.__version__} CPU build supports "
                             f"compute types {sorted(supported)}")
        notes.append(f"CTranslate2 {ctranslate2.__version__}")
    print(f"{n} sentences, {args.threads} thread(s), {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, load {os.getloadavg()[0]:.2f}; " + "; ".join(notes), flush=True)

    effective = {}  # CTranslate2's compute type where it differs from the one asked for

    def one(side, beam, min_len, max_len_b, no_cache=False):
        name, *mods = side.split("+")
        env = MALLOC_ENV if "malloc" in mods else None
        hyp = os.path.join(tmp, f"{side}.hyp")
        common = ["--beam", beam, "--lenpen", args.lenpen, "--min-len", min_len, "--max-tokens", args.max_tokens]
        if name.startswith("normlab"):
            r = run([args.normlab, "--threads", args.threads, "translate", "--checkpoint", checkpoint,
                     "--ids", "--input", ids, "--output", hyp, "--max-len-b", max_len_b]
                    + common + (["--precision", name.split("-")[1]] if "-" in name else []), env)
            secs = normlab_seconds(r.stderr)
        elif name == "peer":
            r = run([sys.executable, __file__, "--peer", "--weights", weights, "--ids", ids, "--hyp-out", hyp,
                     "--max-len-b", max_len_b, "--threads", args.threads] + common
                    + (["--no-cache"] if no_cache else []), env)
            secs = json.loads(r.stdout.splitlines()[-1])["seconds"]
        else:  # CTranslate2: one max length for the whole call (a = 0), capped as normlab caps it
            r = run([sys.executable, __file__, "--ct2-worker", "--ct2-model", ct2_dir, "--compute-type",
                     name[len("ct2-"):], "--ids", ids, "--hyp-out", hyp,
                     "--max-len-b", min(max_len_b, max_positions - 1), "--threads", args.threads] + common
                    + (["--mask-specials"] if "mask" in mods else []), env)
            reply = json.loads(r.stdout.splitlines()[-1])
            secs = reply["seconds"]
            if reply["compute_type"] != name[len("ct2-"):]:
                effective[side] = reply["compute_type"]
        with open(hyp) as f:
            return secs, f.read().splitlines()

    def compare(beam, min_len, max_len_b):
        """Round robin over the sides, --repeats times; medians; differences from the reference side."""
        times, outs = {x: [] for x in sides}, {}
        for _ in range(args.repeats):
            for side in sides:
                secs, out = one(side, beam, min_len, max_len_b)
                times[side].append(secs)
                outs[side] = out
        base = "normlab" if "normlab" in sides else sides[0]
        cap = min(max_len_b, max_positions - 1)
        diff = {}
        for side in sides:
            rows = [i for i, (a, b) in enumerate(zip(outs[base], outs[side])) if a != b]
            diff[side] = (len(rows), sum(len(outs[base][i].split()) >= cap for i in rows),
                          sum(bool({"0", "1", "3"} & set(line.split())) for line in outs[side]))
        return {x: statistics.median(t) for x, t in times.items()}, times, diff, base

    def table(title, med, times, diff, base, per_token=None):
        print(f"{title} ({n} sentences, {args.threads} thread(s), medians of {args.repeats}):")
        print(f"  {'side':<22} {'sent/s':>8} {'median s':>9} {'speed/' + base:>12}  {'differing from ' + base:<40}"
              + ("  ms/token" if per_token else "") + "  times s")
        for side in sides:
            d, capped, specials = diff[side]
            agree = "-" if side == base else (f"{d}/{n}" + (f" ({capped} at the max length)" if capped else ""))
            agree += f" [{specials} with <s>/<pad>/<unk>]" if specials else ""
            print(f"  {side:<22} {n / med[side]:>8.1f} {med[side]:>9.2f} {med[base] / med[side]:>11.2f}x  "
                  f"{agree:<40}" + (f"  {1e3 * med[side] / per_token[side]:>8.3f}" if per_token else "")
                  + f"  {[round(t, 2) for t in times[side]]}", flush=True)

    for beam in [int(b) for b in args.beams.split(",") if b]:
        med, times, diff, base = compare(beam, 1, args.max_len_b)
        table(f"beam {beam}, lenpen {args.lenpen}, max length {args.max_len_b}", med, times, diff, base)
    for length in [int(x) for x in args.lengths.split(",") if x]:
        for beam in [int(b) for b in args.beams.split(",") if b]:
            med, times, diff, base = compare(beam, length, length)
            # length + 1 decoder steps (</s> forced last); CTranslate2 stops after `length` steps
            table(f"forced length {length}, beam {beam} (ms per decoder step and sentence)", med, times, diff,
                  base, per_token={x: n * (length if x.startswith("ct2-") else length + 1) for x in sides})
    for length in [int(x) for x in args.no_cache_lengths.split(",") if x]:
        for beam in [int(b) for b in args.beams.split(",") if b]:
            secs, _ = one("peer", beam, length, length, no_cache=True)
            print(f"forced length {length}, beam {beam}, peer WITHOUT cache: {secs:.2f} s = "
                  f"{1e3 * secs / (n * (length + 1)):.3f} ms per output token", flush=True)
    if effective:
        print("CTranslate2 ran " + ", ".join(f"{s} as compute_type {t}" for s, t in effective.items()))
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
