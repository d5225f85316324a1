"""The decision model: text tokens and image/video patches in one encoder, and a schema head.

Every input has a fixed shape per size (tokens and patches are padded to a maximum
and carry masks), so a compiler sees one shape, CUDA graphs can be replayed and a
TensorRT engine needs one profile; the task's ``dynamic_tokens`` option leaves the
tokens unpadded (a dynamic-shape input). Attention is written out explicitly (no fused
kernels) so the model exports to ONNX.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from benchbox.tasks.decision.spec import SIZES, ModelSpec

__all__ = ["SIZES", "Block", "DecisionModel", "ModelSpec", "Norm", "Precision", "build", "count_parameters"]


@dataclass(frozen=True)
class Precision:
    """Where a reduced-precision model computes in float32 (explicit, recorded options)."""

    softmax_fp32: bool = True
    layernorm_fp32: bool = True
    logits_fp32: bool = True


class Norm(nn.LayerNorm):
    """LayerNorm that can be evaluated in float32 and rounded back to the model dtype."""

    def __init__(self, dim: int, fp32: bool) -> None:
        super().__init__(dim)
        self.fp32 = fp32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fp32 and x.dtype != torch.float32:
            return nn.functional.layer_norm(x.float(), self.normalized_shape, self.weight.float(),
                                            self.bias.float(), self.eps).to(x.dtype)
        return super().forward(x)


class Block(nn.Module):
    """Pre-norm transformer block with explicit attention (exports cleanly to ONNX)."""

    def __init__(self, spec: ModelSpec, prec: Precision) -> None:
        super().__init__()
        self.heads = spec.heads
        self.softmax_fp32 = prec.softmax_fp32
        self.norm1 = Norm(spec.dim, prec.layernorm_fp32)
        self.qkv = nn.Linear(spec.dim, 3 * spec.dim)
        self.proj = nn.Linear(spec.dim, spec.dim)
        self.norm2 = Norm(spec.dim, prec.layernorm_fp32)
        self.fc1 = nn.Linear(spec.dim, spec.ffn)
        self.fc2 = nn.Linear(spec.ffn, spec.dim)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        if self.softmax_fp32:
            attn = torch.softmax(scores.float() + bias, dim=-1).to(x.dtype)
        else:
            attn = torch.softmax(scores + bias.to(x.dtype), dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(b, n, d)
        x = x + self.proj(y)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))


class DecisionModel(nn.Module):
    """Scores each choice of a schema against a text, image or video document.

    Inputs (batch 1, fixed shapes per size): ``tokens``/``token_mask`` [1, T];
    ``patches`` [1, P, 3·p·p] normalized pixels and ``patch_mask`` [1, P];
    ``pos_index``/``pos_weight`` [1, P, 4]: the four cells of the native position
    grid each patch interpolates and their bilinear weights (computed by the
    task's preprocess); ``frame`` [1, P]: each patch's frame; ``choice_tokens``/
    ``choice_mask`` [1, C, L]. Output: ``logits`` [1, C] in float32 (0 for padded
    choices).
    """

    def __init__(self, spec: ModelSpec, prec: Precision | None = None) -> None:
        super().__init__()
        prec = prec or Precision()
        self.spec = spec
        self.logits_fp32 = prec.logits_fp32
        #: tokens of any length up to max_tokens (the task's dynamic_tokens option), else exactly max_tokens
        self.dynamic_tokens = False
        self.embed = nn.Embedding(spec.vocab, spec.dim)
        self.text_pos = nn.Parameter(torch.zeros(spec.max_tokens, spec.dim))
        self.patch_embed = nn.Linear(spec.patch_dim, spec.dim)
        self.grid_pos = nn.Parameter(torch.zeros(spec.native_grid * spec.native_grid, spec.dim))
        self.frame_pos = nn.Parameter(torch.zeros(spec.max_frames, spec.dim))
        self.blocks = nn.ModuleList(Block(spec, prec) for _ in range(spec.layers))
        self.norm = Norm(spec.dim, prec.layernorm_fp32)
        self.doc_proj = nn.Linear(spec.dim, spec.dim)
        self.choice_proj = nn.Linear(spec.dim, spec.dim)
        self.score = nn.Linear(spec.dim, 1)

    def forward(self, tokens: torch.Tensor, token_mask: torch.Tensor, patches: torch.Tensor,
                patch_mask: torch.Tensor, pos_index: torch.Tensor, pos_weight: torch.Tensor,
                frame: torch.Tensor, choice_tokens: torch.Tensor,
                choice_mask: torch.Tensor) -> tuple[torch.Tensor]:
        dtype = self.embed.weight.dtype
        pos = self.text_pos[: tokens.shape[1]] if self.dynamic_tokens else self.text_pos
        text = self.embed(tokens) + pos
        # interpolated position embedding: weighted sum of four native-grid rows, in float32
        pos = (nn.functional.embedding(pos_index, self.grid_pos).float() * pos_weight[..., None]).sum(2)
        vis = (self.patch_embed(patches.to(dtype)) + pos.to(dtype)
               + nn.functional.embedding(frame, self.frame_pos))
        x = torch.cat([text, vis], dim=1)
        mask = torch.cat([token_mask, patch_mask], dim=1).float()
        bias = ((1.0 - mask) * -1e4)[:, None, None, :]
        for block in self.blocks:
            x = block(x, bias)
        x = self.norm(x)
        m = mask.to(dtype)[..., None]
        doc = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
        cm = choice_mask.to(dtype)[..., None]
        ce = (self.embed(choice_tokens) * cm).sum(2) / cm.sum(2).clamp(min=1.0)
        # joint document/choice score: one hidden layer over (document, choice), per choice
        if self.logits_fp32:
            joint = (_linear32(self.doc_proj, doc.float())[:, None, :]
                     + _linear32(self.choice_proj, ce.float()))
            logits = _linear32(self.score, nn.functional.gelu(joint))[..., 0]
        else:
            joint = self.doc_proj(doc)[:, None, :] + self.choice_proj(ce)
            logits = self.score(nn.functional.gelu(joint))[..., 0].float()
        valid = choice_mask.float().amax(-1)
        return (logits * valid,)


def _linear32(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return nn.functional.linear(x, layer.weight.float(), layer.bias.float())


def build(spec: ModelSpec, seed: int, dtype: torch.dtype, prec: Precision | None = None,
          device: str = "cpu") -> DecisionModel:
    """Seeded weights: the same seed gives the same model on every machine.

    On ``device="meta"`` nothing is allocated (for counting parameters of large sizes).
    """
    if device == "meta":
        with torch.device("meta"):
            return DecisionModel(spec, prec).to(dtype).eval()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DecisionModel(spec, prec)
        for name, p in model.named_parameters():
            if name in ("text_pos", "grid_pos", "frame_pos"):
                nn.init.normal_(p, std=0.1)
            elif name.startswith(("doc_proj.", "choice_proj.", "score.")) and p.dim() >= 2:
                # a confident head (as a trained one is): logits spread over a few units
                nn.init.normal_(p, std=(4.0 if name.startswith("score.") else 2.0) / math.sqrt(spec.dim))
            elif p.dim() >= 2:
                nn.init.normal_(p, std=0.5 if "embed." in name else 0.05)
            elif name.endswith("bias"):
                nn.init.normal_(p, std=0.01)
    return model.to(dtype).eval()


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
