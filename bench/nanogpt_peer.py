"""A nanoGPT-style GPT (karpathy/nanoGPT's model.py, as a user would write or copy it): the
PyTorch peer of normlab's decoder-only model in GPT-2's form for bench/train_step.py.

Written from nanoGPT's design, not from normlab: one fused c_attn Linear for q, k and v, causal
F.scaled_dot_product_attention (flash / memory-efficient kernels where PyTorch has them), an MLP
c_fc -> GELU -> c_proj, Pre-LN blocks with biases, a final ln_f, lm_head tied to wte, and
configure_optimizers' AdamW (weight decay on the 2-D tensors only). The MLP's GELU is the tanh
approximation (GPT-2's gelu_new, normlab's --form gpt2; nanoGPT's own nn.GELU() is erf) so that both
sides compute the same function. Weights come from `normlab export --format hf` (a transformers
GPT-2 folder), read as nanoGPT's from_pretrained reads GPT-2's: Conv1D weights transposed.
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

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0, is_causal=True)
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

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
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

    def forward(self, idx):
        pos = torch.arange(idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))

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
