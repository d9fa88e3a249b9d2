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
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
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


@torch.no_grad()
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
        hyps = peer_beam_search(model, peer, src, args.beam, args.lenpen, 0.0, args.max_len_b, args.min_len,
                                config["model"]["max_positions"], args.no_cache)
        for i, h in zip(batch, hyps):
            out[i] = h
    secs = time.perf_counter() - t0
    with open(args.hyp_out, "w") as f:
        f.write("".join(" ".join(map(str, h)) + "\n" for h in out))
    print(json.dumps({"seconds": secs}))


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{r.stderr}")
    return r


def normlab_seconds(stderr):
    """`normlab translate` prints "... in X s: ..." on its last stderr line."""
    line = [l for l in stderr.splitlines() if l.startswith("normlab translate:")][-1]
    return float(line.split(" in ")[1].split(" s")[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--normlab", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--vocab", required=True, help="SentencePiece model of the checkpoint")
    ap.add_argument("--input", required=True, help="source text")
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
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-cache", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--weights", help=argparse.SUPPRESS)
    ap.add_argument("--ids", help=argparse.SUPPRESS)
    ap.add_argument("--hyp-out", help=argparse.SUPPRESS)
    ap.add_argument("--beam", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--min-len", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer:
        return peer_main(args)

    tmp = tempfile.mkdtemp(prefix="normlab_decode_bench_")
    weights, ids = os.path.join(tmp, "weights.pt"), os.path.join(tmp, "src.ids")
    run([args.normlab, "export", "--checkpoint", args.checkpoint, "--out", weights])
    encoded = run([args.normlab, "bpe", "encode", "--model", args.vocab, "--input", args.input, "--ids"]).stdout
    lines = encoded.splitlines()
    if args.sentences:
        lines = lines[:args.sentences]
    with open(ids, "w") as f:
        f.write("\n".join(lines) + "\n")
    n = len(lines)
    print(f"{n} sentences, {args.threads} thread(s), {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, load {os.getloadavg()[0]:.2f}", flush=True)

    def one(side, beam, min_len, max_len_b, no_cache=False):
        hyp = os.path.join(tmp, f"{side}.hyp")
        if side == "normlab":
            r = run([args.normlab, "translate", "--checkpoint", args.checkpoint, "--ids", "--input", ids,
                     "--output", hyp, "--beam", beam, "--lenpen", args.lenpen, "--max-len-b", max_len_b,
                     "--min-len", min_len, "--max-tokens", args.max_tokens, "--threads", args.threads])
            secs = normlab_seconds(r.stderr)
        else:
            r = run([sys.executable, __file__, "--peer", "--normlab", "-", "--checkpoint", "-", "--vocab", "-",
                     "--input", "-", "--weights", weights, "--ids", ids, "--hyp-out", hyp, "--beam", beam,
                     "--lenpen", args.lenpen, "--max-len-b", max_len_b, "--min-len", min_len,
                     "--max-tokens", args.max_tokens, "--threads", args.threads] + (["--no-cache"] if no_cache else []))
            secs = json.loads(r.stdout.splitlines()[-1])["seconds"]
        with open(hyp) as f:
            return secs, f.read().splitlines()

    def compare(beam, min_len, max_len_b, label):
        times = {"normlab": [], "peer": []}
        outs = {}
        for _ in range(args.repeats):
            for side in ("normlab", "peer"):
                secs, out = one(side, beam, min_len, max_len_b)
                times[side].append(secs)
                outs[side] = out
        same = sum(a == b for a, b in zip(outs["normlab"], outs["peer"]))
        med = {s: statistics.median(t) for s, t in times.items()}
        return med, times, same, outs["normlab"]

    for beam in [int(b) for b in args.beams.split(",") if b]:
        med, times, same, _ = compare(beam, 1, args.max_len_b, f"beam {beam}")
        print(f"beam {beam}: normlab {n / med['normlab']:.1f} sent/s (median {med['normlab']:.2f} s of "
              f"{[round(t, 2) for t in times['normlab']]}), PyTorch peer {n / med['peer']:.1f} sent/s (median "
              f"{med['peer']:.2f} s of {[round(t, 2) for t in times['peer']]}), ratio "
              f"{med['peer'] / med['normlab']:.2f}x; identical outputs {same}/{n}", flush=True)
    for length in [int(x) for x in args.lengths.split(",") if x]:
        for beam in [int(b) for b in args.beams.split(",") if b]:
            med, times, same, out = compare(beam, length, length, f"length {length}")
            tokens = n * (length + 1)
            print(f"forced length {length}, beam {beam}: normlab {med['normlab']:.2f} s = "
                  f"{1e3 * med['normlab'] / tokens:.3f} ms per output token; peer {med['peer']:.2f} s = "
                  f"{1e3 * med['peer'] / tokens:.3f} ms per output token; identical {same}/{n}", flush=True)
    for length in [int(x) for x in args.no_cache_lengths.split(",") if x]:
        for beam in [int(b) for b in args.beams.split(",") if b]:
            secs, _ = one("peer", beam, length, length, no_cache=True)
            print(f"forced length {length}, beam {beam}, peer WITHOUT cache: {secs:.2f} s = "
                  f"{1e3 * secs / (n * (length + 1)):.3f} ms per output token", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
