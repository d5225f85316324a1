"""The decision model: a transformer encoder over the document and a schema head."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ModelSpec:
    """Shape of one model size."""

    vocab: int
    dim: int
    layers: int
    heads: int
    ffn: int
    max_tokens: int
    max_choices: int
    choice_tokens: int


SIZES: dict[str, ModelSpec] = {
    "tiny": ModelSpec(vocab=4096, dim=64, layers=2, heads=4, ffn=128, max_tokens=128,
                      max_choices=8, choice_tokens=16),
    "small": ModelSpec(vocab=8192, dim=256, layers=4, heads=4, ffn=1024, max_tokens=256,
                       max_choices=8, choice_tokens=16),
    "base": ModelSpec(vocab=16384, dim=512, layers=8, heads=8, ffn=2048, max_tokens=512,
                      max_choices=8, choice_tokens=16),
    "large": ModelSpec(vocab=32768, dim=1024, layers=16, heads=16, ffn=4096, max_tokens=1024,
                       max_choices=8, choice_tokens=16),
}


class Block(nn.Module):
    """Pre-norm transformer block with explicit attention (exports cleanly to ONNX)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.heads = spec.heads
        self.norm1 = nn.LayerNorm(spec.dim)
        self.qkv = nn.Linear(spec.dim, 3 * spec.dim)
        self.proj = nn.Linear(spec.dim, spec.dim)
        self.norm2 = nn.LayerNorm(spec.dim)
        self.fc1 = nn.Linear(spec.dim, spec.ffn)
        self.fc2 = nn.Linear(spec.ffn, spec.dim)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        # softmax in float32 before rounding back to the model dtype
        attn = torch.softmax(scores.float() + bias, dim=-1).to(x.dtype)
        y = (attn @ v).transpose(1, 2).reshape(b, n, d)
        x = x + self.proj(y)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))


class DecisionModel(nn.Module):
    """Scores each choice of a schema against a document; returns float32 logits."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.spec = spec
        self.embed = nn.Embedding(spec.vocab, spec.dim)
        self.pos = nn.Parameter(torch.randn(spec.max_tokens, spec.dim) * 0.02)
        self.blocks = nn.ModuleList(Block(spec) for _ in range(spec.layers))
        self.norm = nn.LayerNorm(spec.dim)
        self.doc_head = nn.Linear(spec.dim, spec.dim)
        self.choice_head = nn.Linear(spec.dim, spec.dim)

    def forward(self, tokens: torch.Tensor, token_mask: torch.Tensor,
                choice_tokens: torch.Tensor, choice_mask: torch.Tensor) -> tuple[torch.Tensor]:
        dtype = self.embed.weight.dtype
        n = tokens.shape[1]
        x = self.embed(tokens) + self.pos[:n].to(dtype)
        bias = ((1.0 - token_mask.float()) * -1e4)[:, None, None, :]
        for block in self.blocks:
            x = block(x, bias)
        x = self.norm(x)
        m = token_mask.to(dtype)[..., None]
        doc = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
        cm = choice_mask.to(dtype)[..., None]
        ce = (self.embed(choice_tokens) * cm).sum(2) / cm.sum(2).clamp(min=1.0)
        d = self.doc_head(doc).float()
        c = self.choice_head(ce).float()
        # the joint document/choice score is evaluated in float32
        logits = (c * d[:, None, :]).sum(-1) * (1.0 / math.sqrt(self.spec.dim))
        valid = choice_mask.float().amax(-1)
        return (logits * valid,)


def build(spec: ModelSpec, seed: int, dtype: torch.dtype) -> DecisionModel:
    """Seeded weights: the same seed gives the same model on every machine."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DecisionModel(spec)
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.05 if "embed" not in name else 0.5)
            elif name.endswith("bias"):
                nn.init.normal_(p, std=0.01)
    return model.to(dtype).eval()
