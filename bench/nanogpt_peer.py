"""A nanoGPT-style GPT (karpathy/nanoGPT's model.py, as a user would write or copy it): the
PyTorch peer of normlab's decoder-only model in GPT-2's form for bench/train_step.py and
bench/generate.py.

Written from nanoGPT's design, not from normlab: one fused c_attn Linear for q, k and v, causal
F.scaled_dot_product_attention (flash / memory-efficient kernels where PyTorch has them), an MLP
c_fc -> GELU -> c_proj, Pre-LN blocks with biases, a final ln_f, lm_head tied to wte, and
configure_optimizers' AdamW (weight decay on the 2-D tensors only). The MLP's GELU is the tanh
approximation (GPT-2's gelu_new, normlab's --form gpt2; nanoGPT's own nn.GELU() is erf) so that both
sides compute the same function. Weights come from `normlab export --format hf` (a transformers
GPT-2 folder), read as nanoGPT's from_pretrained reads GPT-2's: Conv1D weights transposed.

Generation: `generate` is nanoGPT's loop (the whole context, cropped to the block size, through
the model for every new token; logits of the last position only), with the choice of the next
token passed in (`pick`; nanoGPT's is temperature, top-k and torch.multinomial). nanoGPT has no
key/value cache; `generate_cached` adds the usual one: the prompt in one forward (causal
attention, as in training) that writes each layer's keys and values into buffers preallocated
for the whole sequence, then one token a step, whose single query attends over the buffers'
filled prefix (scaled_dot_product_attention without a mask).
"""
import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd, self.dropout = n_head, n_embd, dropout
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x, kv=None, start=0):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if kv is not None:  # generate_cached: positions start.. into the layer's buffers, attend over 0..
            if "k" not in kv:
                kv["k"], kv["v"] = (t.new_empty(B, self.n_head, kv["size"], C // self.n_head) for t in (k, v))
            kv["k"][:, :, start:start + T], kv["v"][:, :, start:start + T] = k, v
            k, v = kv["k"][:, :, :start + T], kv["v"][:, :, :start + T]
        # is_causal's mask is aligned top-left: right for a whole block (training, prefill) and
        # not needed for one query over the cache; a block after cached positions is not supported.
        assert T == 1 or start == 0, "generate_cached: several queries after cached positions"
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0, is_causal=T > 1)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd, n_inner, dropout):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, n_inner)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(n_inner, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, n_inner, dropout, eps):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=eps)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln_2 = nn.LayerNorm(n_embd, eps=eps)
        self.mlp = MLP(n_embd, n_inner, dropout)

    def forward(self, x, kv=None, start=0):
        x = x + self.attn(self.ln_1(x), kv, start)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        C, dropout = config["n_embd"], config["resid_pdrop"]
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config["vocab_size"], C),
            wpe=nn.Embedding(config["n_positions"], C),
            drop=nn.Dropout(config["embd_pdrop"]),
            h=nn.ModuleList(Block(C, config["n_head"], config["n_inner"], dropout, config["layer_norm_epsilon"])
                            for _ in range(config["n_layer"])),
            ln_f=nn.LayerNorm(C, eps=config["layer_norm_epsilon"]),
        ))
        self.lm_head = nn.Linear(C, config["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx, last_only=False, cache=None, start=0):
        """Logits of every position (training), of the last only with last_only (nanoGPT's
        inference forward); with `cache` (generate_cached's), idx holds positions start.. ."""
        pos = torch.arange(start, start + idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block, kv in zip(self.transformer.h, cache or [None] * len(self.transformer.h)):
            x = block(x, kv, start)
        return self.lm_head(self.transformer.ln_f(x[:, [-1], :] if last_only else x))

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, pick):
        """nanoGPT's generate: idx (B, T) extended by max_new_tokens tokens, each
        pick(logits of the last position (B, V), step) -> (B, 1)."""
        block_size = self.config["n_positions"]
        for step in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
            logits = self(idx_cond, last_only=True)
            idx = torch.cat((idx, pick(logits[:, -1, :], step)), dim=1)
        return idx

    @torch.no_grad()
    def generate_cached(self, idx, max_new_tokens, pick):
        """generate with a key/value cache; the whole sequence must fit the block size."""
        size = idx.size(1) + max_new_tokens - 1  # the last token is never fed back
        if size > self.config["n_positions"]:
            raise ValueError(f"{size} positions do not fit the block size {self.config['n_positions']}")
        cache = [{"size": size} for _ in self.transformer.h]
        logits = self(idx, last_only=True, cache=cache)
        for step in range(max_new_tokens):
            idx_next = pick(logits[:, -1, :], step)
            idx = torch.cat((idx, idx_next), dim=1)
            if step + 1 < max_new_tokens:
                logits = self(idx_next, last_only=True, cache=cache, start=idx.size(1) - 1)
        return idx

    @classmethod
    def from_hf_export(cls, folder):
        """nanoGPT's from_pretrained on a transformers GPT-2 folder (tied embeddings only)."""
        config = json.load(open(os.path.join(folder, "config.json")))
        if not config.get("tie_word_embeddings", True):
            raise ValueError("the nanoGPT peer ties lm_head to wte: export a tied model")
        model = cls(config)
        theirs = load_file(os.path.join(folder, "model.safetensors"))
        transposed = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
        with torch.no_grad():
            for name, tensor in model.state_dict().items():
                if name == "lm_head.weight":
                    continue  # the tied wte
                source = theirs[name]
                tensor.copy_(source.t() if name.endswith(transposed) else source)
        return model

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)
