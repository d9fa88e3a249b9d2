"""Independent PyTorch reference of the normlab encoder-decoder Transformer.

Written only from docs/conventions.md ("conv" below) and ../shared/REFERENCE.md sections 1-2
("REF"), never from the C++ sources, so that the tests comparing the two check the math rather
than a shared transcription. Tensors are batch-first. Dimension names: B batch, S source length,
T target length, C d_model, F FFN dimension, H heads, D head dimension (C/H), V vocabulary.
"""

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

# (norm placement, residual form) pairs of the scheme table (conv "Layers", REF 1 and 10).
SUPPORTED_SCHEMES = {
    ("post", "plain"), ("post", "admin"), ("post", "deepnorm"),
    ("pre", "plain"), ("peri", "plain"), ("mix", "plain"),
    ("none", "plain"), ("none", "rezero"),
}


def load_weights(path_pt):
    """Read `weights.pt` (dict name -> tensor, aliases included) and the sibling `weights.json`."""
    path_pt = Path(path_pt)
    state = torch.load(path_pt, map_location="cpu", weights_only=True)
    with open(path_pt.with_suffix(".json"), encoding="utf-8") as f:
        config = json.load(f)
    return state, config


def sinusoidal_table(num_positions, dim):
    """P[p] = [sin(p * freq) | cos(p * freq)], freq_i = exp(-i ln(10000) / (half - 1)) (REF 1)."""
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float64) * (-math.log(10000.0) / (half - 1)))
    angles = torch.arange(num_positions, dtype=torch.float64).unsqueeze(1) * freq.unsqueeze(0)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


class DynamicTanh(nn.Module):
    """DyT (Zhu et al. 2025, REF 10): weight * tanh(alpha * x) + bias, alpha one scalar."""

    def __init__(self, dim, alpha_init):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((1,), float(alpha_init)))
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return self.weight * torch.tanh(self.alpha * x) + self.bias


def make_norm(cfg, dim):
    """The scheme's norm over the last `dim` entries (REF 10): nn.LayerNorm, nn.RMSNorm (both
    with eps `layer_norm_eps`) or DyT, with PyTorch's parameter names (weight, bias, alpha)."""
    kind = cfg.get("norm_kind", "layernorm")
    if kind == "layernorm":
        norm = nn.LayerNorm(dim, eps=cfg["layer_norm_eps"])
    elif kind == "rmsnorm":
        norm = nn.RMSNorm(dim, eps=cfg["layer_norm_eps"])
    elif kind == "dyt":
        norm = DynamicTanh(dim, cfg["dyt_alpha_init"])
    else:
        raise ValueError(f"unknown norm kind {kind!r}")
    return norm


class MultiheadAttention(nn.Module):
    """q = q_proj(x) / sqrt(D); softmax(q k^T + mask) v per head; heads concatenated; out_proj.
    With QK-norm (REF 10): q = q_norm(q_proj(x) per head) / sqrt(D), k = k_norm(k_proj(x) per
    head), each norm over a head's D entries, its parameters shared by the heads. cfg's optional
    "attention_scale" replaces 1/sqrt(D) (muP's 1/d attention: tests/reference/check_mup.py)."""

    def __init__(self, dim, heads, attention_dropout, cfg=None):
        super().__init__()
        if dim % heads:
            raise ValueError(f"d_model {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.head_dim = dim // heads
        self.attention_dropout = attention_dropout
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)
        self.scale = (cfg or {}).get("attention_scale")  # None: 1/sqrt(D)
        self.qk_norm = bool(cfg and cfg.get("qk_norm"))
        if self.qk_norm:
            self.q_norm = make_norm(cfg, self.head_dim)
            self.k_norm = make_norm(cfg, self.head_dim)

    def _scaled(self, q):
        return q / math.sqrt(self.head_dim) if self.scale is None else q * self.scale

    def _split_heads(self, x):
        """(B, L, C) -> (B, H, L, D)."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, kv, blocked):
        """x: (B, T, C) queries; kv: (B, S, C); blocked: bool, broadcastable to (B, H, T, S)."""
        if self.qk_norm:
            q = self._scaled(self.q_norm(self._split_heads(self.q_proj(x))))
            k = self.k_norm(self._split_heads(self.k_proj(kv)))
        else:
            q = self._split_heads(self._scaled(self.q_proj(x)))
            k = self._split_heads(self.k_proj(kv))
        v = self._split_heads(self.v_proj(kv))
        scores = torch.matmul(q, k.transpose(-1, -2)).masked_fill(blocked, float("-inf"))
        probs = F.dropout(torch.softmax(scores, dim=-1), self.attention_dropout, self.training)
        return self.out_proj(torch.matmul(probs, v).transpose(1, 2).flatten(2))


def layer_norm_name(block):
    """fairseq's name of a block's LayerNorm: the FFN block's is `final_layer_norm` (conv)."""
    return "final_layer_norm" if block == "ffn" else f"{block}_layer_norm"


def layer_placement(scheme, index, count):
    """Mix-LN (REF 10): Post-LN in layers index < floor(alpha * count), Pre-LN in the rest; the
    last `norm_free` layers of the stack none (conv "Layers without norms", DT-Fixup's layers)."""
    if index >= count - scheme.get("norm_free", 0):
        return "none"
    if scheme["norm"] != "mix":
        return scheme["norm"]
    return "post" if index < math.floor(scheme["mix_ln_alpha"] * count) else "pre"


class TransformerLayer(nn.Module):
    """What encoder and decoder layers share: the FFN and the residual scheme of each block.
    `index` is the layer's 0-based position in a stack of `count` layers."""

    def __init__(self, cfg, scheme, blocks, index, count):
        super().__init__()
        dim = cfg["d_model"]
        self.norm, self.residual = layer_placement(scheme, index, count), scheme["residual"]
        self.dropout = cfg["dropout"]
        self.activation_dropout = cfg["activation_dropout"]
        self.activation = cfg.get("activation", "relu")
        self.deepnorm_alpha = scheme["deepnorm_alpha"]
        self.fc1 = nn.Linear(dim, cfg["ffn_dim"])
        self.fc2 = nn.Linear(cfg["ffn_dim"], dim)
        # LayerNorm scaling (REF 10): the norms of layer l = index + 1 times 1/sqrt(l).
        self.norm_scale = 1.0 / math.sqrt(index + 1) if scheme.get("ln_scaling") else 1.0
        for block in blocks:
            if self.norm in ("post", "pre", "peri"):  # one norm per block
                self.add_module(layer_norm_name(block), make_norm(cfg, dim))
            if self.norm == "peri":  # Peri-LN: and one on the block's output
                self.add_module(f"{block}_output_layer_norm", make_norm(cfg, dim))
            if self.residual == "admin":  # Admin: a learnable vector omega per block
                self.register_parameter(f"{block}_omega", nn.Parameter(torch.ones(dim)))
        if self.residual == "rezero":  # ReZero: one scalar per layer, shared by its blocks
            self.rezero_alpha = nn.Parameter(torch.zeros(1))

    def feed_forward(self, x):
        """fc2(dropout_act(act(fc1(x)))) (conv "Layers"); act from model.activation (absent: relu;
        gelu: erf GELU; gelu-tanh: GPT-2's tanh approximation)."""
        act = {"relu": torch.relu, "gelu": F.gelu,
               "gelu-tanh": lambda t: F.gelu(t, approximate="tanh")}[self.activation]
        hidden = F.dropout(act(self.fc1(x)), self.activation_dropout, self.training)
        return self.fc2(hidden)

    def block(self, x, f, block):
        """One residual sub-layer, per the scheme table of conv "Layers" / REF 1:

        post/plain    LN(x + drop(f(x)))
        post/admin    LN(x * omega + drop(f(x)))
        post/deepnorm LN(alpha * x + drop(f(x)))
        pre/plain     x + drop(f(LN(x)))
        peri/plain    x + drop(LN_out(f(LN(x))))    (Peri-LN, REF 10)
        none/plain    x + drop(f(x))                (T-Fixup)
        none/rezero   x + drop(alpha_l * f(x))
        LN being the scheme's norm kind (make_norm).
        """
        def normed(name, t):  # LayerNorm scaling multiplies every norm's output of the layer
            return getattr(self, name)(t) * self.norm_scale

        def layer_norm(t):
            return normed(layer_norm_name(block), t)

        if self.norm == "pre":
            return x + F.dropout(f(layer_norm(x)), self.dropout, self.training)
        if self.norm == "peri":
            output = normed(f"{block}_output_layer_norm", f(layer_norm(x)))
            return x + F.dropout(output, self.dropout, self.training)
        branch = f(x)
        if self.residual == "rezero":
            branch = self.rezero_alpha * branch
        if self.residual == "admin":
            x = x * getattr(self, f"{block}_omega")
        elif self.residual == "deepnorm":
            x = self.deepnorm_alpha * x
        y = x + F.dropout(branch, self.dropout, self.training)
        return layer_norm(y) if self.norm == "post" else y


class EncoderLayer(TransformerLayer):
    """Self-attention block, then FFN block."""

    def __init__(self, cfg, scheme, index, count):
        super().__init__(cfg, scheme, ("self_attn", "ffn"), index, count)
        self.self_attn = MultiheadAttention(cfg["d_model"], cfg["heads"], cfg["attention_dropout"], cfg)

    def forward(self, x, self_blocked):
        x = self.block(x, lambda h: self.self_attn(h, h, self_blocked), "self_attn")
        return self.block(x, self.feed_forward, "ffn")


class DecoderLayer(TransformerLayer):
    """Causal self-attention block, cross-attention block, then FFN block; without the
    cross-attention block in a decoder-only model (fairseq's transformer_lm, no_encoder_attn)."""

    def __init__(self, cfg, scheme, index, count, cross_attention=True):
        blocks = ("self_attn", "encoder_attn", "ffn") if cross_attention else ("self_attn", "ffn")
        super().__init__(cfg, scheme, blocks, index, count)
        self.self_attn = MultiheadAttention(cfg["d_model"], cfg["heads"], cfg["attention_dropout"], cfg)
        if cross_attention:
            self.encoder_attn = MultiheadAttention(cfg["d_model"], cfg["heads"], cfg["attention_dropout"], cfg)

    def forward(self, x, self_blocked, encoder_out, cross_blocked):
        x = self.block(x, lambda h: self.self_attn(h, h, self_blocked), "self_attn")
        if hasattr(self, "encoder_attn"):
            x = self.block(x, lambda h: self.encoder_attn(h, encoder_out, cross_blocked), "encoder_attn")
        return self.block(x, self.feed_forward, "ffn")


class Embedder(nn.Module):
    """x = embed_scale * E[token] + P[t], then dropout (conv "Embeddings"). P is the sinusoidal
    table read from row t + position_offset, or with model.positions "learned" the parameter
    embed_positions (max_positions rows, row t for position t).

    The table E is passed in so that shared embeddings are one Parameter object: registered
    first under the stored name, later modules see it as an alias (conv "Shared embeddings").
    """

    def __init__(self, cfg, embed_tokens):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.embed_scale = cfg["embed_scale"]
        self.dropout = cfg["dropout"]
        if cfg.get("positions", "sinusoidal") == "learned":
            self.embed_positions = nn.Embedding(cfg["max_positions"], cfg["d_model"])
            self.position_offset = 0
            return
        self.position_offset = cfg["position_offset"]
        self.register_buffer(
            "positions", sinusoidal_table(cfg["max_positions"] + self.position_offset, cfg["d_model"]),
            persistent=False)

    def embed(self, tokens):
        return F.dropout(self.embed_sum(tokens), self.dropout, self.training)

    def embed_sum(self, tokens):
        """The embedding before dropout."""
        length = tokens.size(1)
        table = self.embed_positions.weight if hasattr(self, "embed_positions") else self.positions
        if length + self.position_offset > table.size(0):
            raise ValueError(f"sequence of {length} tokens exceeds max_positions")
        positions = table[self.position_offset:self.position_offset + length]
        # Padding tokens get the zero position vector, as in fairseq (conv "Embeddings").
        not_pad = tokens.ne(self.embed_tokens.padding_idx).unsqueeze(-1)
        return self.embed_scale * self.embed_tokens(tokens) + positions.to(self.embed_tokens.weight.dtype) * not_pad


FINAL_NORM_PLACEMENTS = ("pre", "peri", "mix")  # a final norm after the last layer (REF 1, 10)


class Encoder(Embedder):
    """Embeddings, encoder layers, and for Pre-LN, Peri-LN and Mix-LN a final norm. With
    model.segment_types > 0 a table segment_embeddings (row 0 added everywhere: one segment), and
    with model.embedding_norm a norm layernorm_embedding on the embedding's sum before dropout
    (BERT's embedding; conv "Model kinds")."""

    def __init__(self, cfg, scheme, embed_tokens):
        super().__init__(cfg, embed_tokens)
        if cfg.get("segment_types", 0) > 0:
            self.segment_embeddings = nn.Embedding(cfg["segment_types"], cfg["d_model"])
        if cfg.get("embedding_norm", False):
            self.layernorm_embedding = make_norm(cfg, cfg["d_model"])
        count = cfg["encoder_layers"]
        self.layers = nn.ModuleList(EncoderLayer(cfg, scheme, i, count) for i in range(count))
        if scheme["norm"] in FINAL_NORM_PLACEMENTS:
            self.layer_norm = make_norm(cfg, cfg["d_model"])

    def forward(self, src_tokens, src_blocked):
        """src_blocked: (B, 1, 1, S), True at padded source keys. Returns (B, S, C)."""
        x = self.embed_sum(src_tokens)
        if hasattr(self, "segment_embeddings"):
            x = x + self.segment_embeddings.weight[0]
        if hasattr(self, "layernorm_embedding"):
            x = self.layernorm_embedding(x)
        x = F.dropout(x, self.dropout, self.training)
        for layer in self.layers:
            x = layer(x, src_blocked)
        return self.layer_norm(x) if hasattr(self, "layer_norm") else x


class Decoder(Embedder):
    """Embeddings, decoder layers, a final norm as the encoder's, then the output projection."""

    def __init__(self, cfg, scheme, embed_tokens, output_weight, cross_attention=True):
        super().__init__(cfg, embed_tokens)
        count = cfg["decoder_layers"]
        self.layers = nn.ModuleList(DecoderLayer(cfg, scheme, i, count, cross_attention) for i in range(count))
        if scheme["norm"] in FINAL_NORM_PLACEMENTS:
            self.layer_norm = make_norm(cfg, cfg["d_model"])
        self.output_projection = nn.Linear(cfg["d_model"], cfg["tgt_vocab_size"], bias=False)
        self.readout_multiplier = cfg.get("readout_multiplier", 1.0)
        if output_weight is not None:
            self.output_projection.weight = output_weight

    def forward(self, prev_output_tokens, encoder_out, src_blocked):
        """Returns logits (B, T, V) = x W_out^T (conv "Layers")."""
        length = prev_output_tokens.size(1)
        causal = torch.ones(length, length, dtype=torch.bool,
                            device=prev_output_tokens.device).triu(1)  # key after query
        # Padded keys are masked too (REF 1); with right padding that only changes padded rows.
        self_blocked = causal | key_padding(prev_output_tokens, self.embed_tokens.padding_idx)
        x = self.embed(prev_output_tokens)
        for layer in self.layers:
            x = layer(x, self_blocked, encoder_out, src_blocked)
        if hasattr(self, "layer_norm"):
            x = self.layer_norm(x)
        if self.readout_multiplier != 1.0:  # muP's readout: MuReadout's output_mult / width_mult
            x = self.readout_multiplier * x
        return self.output_projection(x)


class MaskedLmHead(nn.Module):
    """RoBERTa's LM head (conv "Model kinds"): logits = norm(act(dense(x))) W^T + bias, W the
    token table when tied (share_embeddings decoder), else the head's own `weight`; under muP the
    input of the product x W^T times cfg's "readout_multiplier" (the bias is not scaled)."""

    def __init__(self, cfg, tied_weight):
        super().__init__()
        dim, vocab = cfg["d_model"], cfg["src_vocab_size"]
        self.dense = nn.Linear(dim, dim)
        self.layer_norm = make_norm(cfg, dim)
        self.weight = tied_weight if tied_weight is not None else nn.Parameter(torch.empty(vocab, dim))
        self.bias = nn.Parameter(torch.zeros(vocab))
        self.readout_multiplier = cfg.get("readout_multiplier", 1.0)
        self.activation = {"relu": torch.relu, "gelu": F.gelu,
                           "gelu-tanh": lambda t: F.gelu(t, approximate="tanh")}[cfg.get("activation", "relu")]

    def forward(self, x):
        h = self.layer_norm(self.activation(self.dense(x)))
        if self.readout_multiplier != 1.0:
            h = self.readout_multiplier * h
        return F.linear(h, self.weight, self.bias)


def key_padding(tokens, pad):
    """(B, L) tokens -> (B, 1, 1, L) bool, True at padding keys (broadcast over heads, queries)."""
    return tokens.eq(pad)[:, None, None, :]


class ReferenceTransformer(nn.Module):
    """The normlab model, built from the `weights.json` dict; parameters carry fairseq names.
    model.kind "decoder-only" (conv "Model kinds"): the decoder alone, without cross-attention,
    reading prev_output_tokens only.

    attention_scale (the factor on q.k, default 1/sqrt(D)) and readout_multiplier (on the output
    projection's input, default 1) give muP's forward multipliers (docs/width.md); when not
    passed they are read from weights.json's keys of the same names if it has them."""

    def __init__(self, config, attention_scale=None, readout_multiplier=None):
        super().__init__()
        cfg = dict(config["model"])
        for key in ("position_offset", "embed_scale", "layer_norm_eps"):
            cfg[key] = config[key]
        for key, value in (("attention_scale", attention_scale), ("readout_multiplier", readout_multiplier)):
            value = config.get(key) if value is None else value
            if value is not None:
                cfg[key] = value
        scheme = config["scheme"]
        # The norm settings of REF 10; absent from files of older versions (plain LayerNorm).
        cfg["norm_kind"] = scheme.get("norm_kind", "layernorm")
        cfg["qk_norm"] = scheme.get("qk_norm", False)
        cfg["dyt_alpha_init"] = scheme.get("dyt_alpha_init", 0.5)
        if (scheme["norm"], scheme["residual"]) not in SUPPORTED_SCHEMES:
            raise ValueError(f"unsupported scheme {scheme['norm']}/{scheme['residual']}")
        self.pad = config["special_tokens"]["pad"]
        share = cfg["share_embeddings"]
        if share == "all" and cfg["src_vocab_size"] != cfg["tgt_vocab_size"]:
            raise ValueError("share_embeddings=all needs equal source and target vocabularies")

        def table(vocab):
            return nn.Embedding(vocab, cfg["d_model"], padding_idx=self.pad)

        def stack_scheme(side):  # DeepNorm's alpha is a constant per stack
            return {"norm": scheme["norm"], "residual": scheme["residual"],
                    "deepnorm_alpha": scheme[f"{side}_alpha"],
                    "mix_ln_alpha": scheme.get("mix_ln_alpha", 0.25),
                    "ln_scaling": scheme.get("ln_scaling", False),
                    "norm_free": cfg.get(f"norm_free_{side}_layers", 0)}

        self.kind = cfg.get("kind", "encoder-decoder")
        self.decoder_only = self.kind == "decoder-only"
        if self.kind == "encoder-only":
            if share == "all":
                raise ValueError("an encoder-only model has one table: share_embeddings decoder or none")
            table_ = table(cfg["src_vocab_size"])
            self.encoder = Encoder(cfg, stack_scheme("encoder"), table_)
            self.lm_head = MaskedLmHead(cfg, table_.weight if share == "decoder" else None)
            return
        if self.decoder_only:
            if share == "all":
                raise ValueError("a decoder-only model has one table: share_embeddings decoder or none")
            table_ = table(cfg["tgt_vocab_size"])
            self.decoder = Decoder(cfg, stack_scheme("decoder"), table_,
                                   table_.weight if share == "decoder" else None, cross_attention=False)
            return
        src_table = table(cfg["src_vocab_size"])
        tgt_table = src_table if share == "all" else table(cfg["tgt_vocab_size"])
        self.encoder = Encoder(cfg, stack_scheme("encoder"), src_table)
        self.decoder = Decoder(cfg, stack_scheme("decoder"), tgt_table,
                               tgt_table.weight if share in ("all", "decoder") else None)

    def tied_aliases(self):
        """alias -> stored name, as `weights.json` lists them under `tied`."""
        stored = {id(p): name for name, p in self.named_parameters()}
        return {name: stored[id(p)]
                for name, p in self.named_parameters(remove_duplicate=False)
                if stored[id(p)] != name}

    def forward(self, src_tokens, prev_output_tokens):
        """Logits at the target's positions: an encoder-only model's at every source position."""
        if self.kind == "encoder-only":  # prev_output_tokens are not read
            return self.lm_head(self.encoder(src_tokens, key_padding(src_tokens, self.pad)))
        if self.decoder_only:  # the source is not read
            return self.decoder(prev_output_tokens, None, None)
        src_blocked = key_padding(src_tokens, self.pad)
        encoder_out = self.encoder(src_tokens, src_blocked)
        return self.decoder(prev_output_tokens, encoder_out, src_blocked)

    @torch.no_grad()
    def reset_parameters_fairseq(self):
        """fairseq's initialisation (REF 1) for plain Post-/Pre-LN: Xavier-uniform Linears with
        zero bias (q/k/v gain 1/sqrt(2)), embeddings N(0, C^-1/2) with a zero padding row,
        LN gamma 1 beta 0. The special schemes' inits (T-Fixup, Admin, DeepNorm) are not
        reproduced: the tests load normlab's weights instead."""
        dim = self.encoder.embed_tokens.embedding_dim
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear) and not name.endswith("output_projection"):
                gain = 2 ** -0.5 if name.endswith(("q_proj", "k_proj", "v_proj")) else 1.0
                nn.init.xavier_uniform_(module.weight, gain=gain)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        tables = [self.encoder.embed_tokens.weight, self.decoder.embed_tokens.weight]
        for weight in {id(w): w for w in tables}.values():  # a shared table once
            nn.init.normal_(weight, mean=0.0, std=dim ** -0.5)
            weight[self.pad].zero_()
        output = self.decoder.output_projection.weight
        if all(output is not w for w in tables):  # unshared output projection: N(0, C^-1/2)
            nn.init.normal_(output, mean=0.0, std=dim ** -0.5)
        for name, param in self.named_parameters():
            if name.endswith("_omega"):
                nn.init.ones_(param)
            elif name.endswith("rezero_alpha"):
                nn.init.zeros_(param)


def pad_rows(rows, pad=1):
    """Lists of ids -> a right-padded LongTensor."""
    out = torch.full((len(rows), max(map(len, rows))), pad, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def make_batch(src_lines, tgt_lines, pad=1, eos=2):
    """Lists of id lists (no special tokens) -> right-padded LongTensors (conv "Tokens"):
    source `x </s>`, prev_output_tokens `</s> y`, target `y </s>`."""
    def pad_rows_(rows):
        return pad_rows(rows, pad)

    source = pad_rows_([list(x) + [eos] for x in src_lines])
    prev_output_tokens = pad_rows_([[eos] + list(y) for y in tgt_lines])
    target = pad_rows_([list(y) + [eos] for y in tgt_lines])
    return source, prev_output_tokens, target


def label_smoothed_loss(logits, target, eps, formula, pad):
    """Summed label-smoothed cross entropy over non-padding targets (conv "Loss", REF 2).

    lp = log_softmax(logits), nll = -lp[target], smooth = -sum_v lp[v];
    uniform:   (1 - eps) * nll + eps / V * smooth
    exclusive: (1 - eps - eps / (V - 1)) * nll + eps / (V - 1) * smooth
    Returns (summed loss, summed nll, number of non-padding target tokens).
    """
    vocab = logits.size(-1)
    lp = torch.log_softmax(logits, dim=-1)
    keep = target.ne(pad)
    nll = -lp.gather(-1, target.unsqueeze(-1)).squeeze(-1)[keep]
    smooth = -lp.sum(-1)[keep]
    if formula == "uniform":
        loss = (1.0 - eps) * nll + eps / vocab * smooth
    elif formula == "exclusive":
        loss = (1.0 - eps - eps / (vocab - 1)) * nll + eps / (vocab - 1) * smooth
    else:
        raise ValueError(f"unknown label smoothing formula {formula!r}")
    return loss.sum(), nll.sum(), int(keep.sum())
