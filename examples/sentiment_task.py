"""A complete custom benchbox task: review sentiment with a tiny bag-of-words model.

Run it with ``benchbox run --task examples.sentiment_task:make_task`` from the
repository root (the directory holding ``examples/``). Everything a task needs is
here: the host stages (parse, preprocess, reduce, answer, serialize), two fixture
cases, and a seeded torch model whose ``forward`` takes the preprocessed arrays in
``input_names`` order and returns a tuple in ``output_names`` order.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

import numpy as np

from benchbox.tasks import Case, Task

VOCAB = 2048
MAX_WORDS = 64
LABELS = ("negative", "positive")
_WORD = re.compile(r"[a-z']+")


def _ids(text: str) -> list[int]:
    return [1 + zlib.crc32(w.encode()) % (VOCAB - 1) for w in _WORD.findall(text.lower())]


class SentimentTask(Task):
    """``{"id": ..., "text": ...}`` in, ``{"id", "label", "confidence"}`` out."""

    name = "sentiment"
    input_names = ("words", "mask")
    output_names = ("logits",)

    def parse(self, request: bytes) -> dict[str, str]:
        try:
            obj = json.loads(request)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"request is not JSON: {e}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise ValueError("request must be an object with a string 'text'")
        return {"id": str(obj.get("id", "")), "text": obj["text"]}

    def preprocess(self, request: dict[str, str]) -> tuple[np.ndarray, ...]:
        ids = _ids(request["text"])[:MAX_WORDS]
        words = np.zeros((1, MAX_WORDS), np.int64)   # fixed shapes: pad, and say what is real
        mask = np.zeros((1, MAX_WORDS), np.float32)
        words[0, : len(ids)] = ids
        mask[0, : len(ids)] = 1.0
        return words, mask

    def reduce(self, outputs: dict[str, np.ndarray], request: Any) -> np.ndarray:
        z = outputs["logits"][0].astype(np.float64)
        e = np.exp(z - z.max())
        return e / e.sum()

    def answer(self, reduced: np.ndarray, request: dict[str, str]) -> dict[str, Any]:
        best = int(np.argmax(reduced))
        return {"id": request["id"], "label": LABELS[best], "confidence": round(float(reduced[best]), 6)}

    def serialize(self, answer: dict[str, Any]) -> bytes:
        return json.dumps(answer, separators=(",", ":")).encode()

    def cases(self) -> list[Case]:
        return [
            Case("praise", json.dumps({"id": "r-1", "text": "The pump arrived early, installs in "
                                       "minutes and runs quietly. Great value."}).encode()),
            Case("complaint", json.dumps({"id": "r-2", "text": "Stopped working after two days; "
                                          "support never answered my emails."}).encode()),
        ]

    def build_model(self) -> Any:
        import torch
        from torch import nn

        class BagOfWords(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = nn.Embedding(VOCAB, 32)
                self.head = nn.Linear(32, len(LABELS))

            def forward(self, words: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor]:
                m = mask.to(self.embed.weight.dtype)[..., None]
                pooled = (self.embed(words) * m).sum(1) / m.sum(1).clamp(min=1.0)
                return (self.head(pooled).float(),)

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.options.get("seed", 0)))
            model = BagOfWords()
        return model.to(getattr(torch, self.dtype)).eval()

    # optional: let the probability gate see the probabilities, and compare labels only
    def probabilities(self, reduced: Any) -> np.ndarray | None:
        return reduced

    def answer_key(self, answer: Any) -> Any:
        return answer["label"]


def make_task(size: str = "tiny", dtype: str = "float32", options: dict[str, Any] | None = None,
              gate_overrides: dict[str, float] | None = None) -> SentimentTask:
    """The factory ``--task examples.sentiment_task:make_task`` calls (with these keywords)."""
    if size != "tiny":
        raise ValueError(f"the sentiment task has one size, tiny (got {size!r})")
    return SentimentTask(size=size, dtype=dtype, options=dict(options or {}),
                         gate_overrides=dict(gate_overrides or {}))
