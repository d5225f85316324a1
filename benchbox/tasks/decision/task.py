"""The built-in ``decision`` task: a document plus a schema of choices in, a label out."""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from benchbox.tasks.base import Case, Task
from benchbox.tasks.decision.model import SIZES

PAD, CLS, SEP = 0, 1, 2
_RESERVED = 3
_WORD = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
CASE_NAMES = ("invoice", "outage", "receipt")


@dataclass(frozen=True)
class Choice:
    label: str
    description: str


@dataclass(frozen=True)
class Request:
    id: str
    text: str
    question: str
    choices: tuple[Choice, ...]


def tokenize(text: str, vocab: int) -> list[int]:
    """Deterministic hashing tokenizer: lower-cased words and symbols → ids."""
    span = vocab - _RESERVED
    return [_RESERVED + zlib.crc32(w.encode()) % span for w in _WORD.findall(text.lower())]


def _field(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in obj:
        raise ValueError(f"{where}: missing '{key}'")
    value = obj[key]
    if not isinstance(value, kind):
        raise ValueError(f"{where}.{key}: expected {kind.__name__}, got {type(value).__name__}")
    return value


class DecisionTask(Task):
    """Structured decision over a text document: which choice of the schema fits."""

    name = "decision"
    input_names = ("tokens", "token_mask", "choice_tokens", "choice_mask")
    output_names = ("logits",)

    def __post_init__(self) -> None:
        if self.size not in SIZES:
            raise ValueError(f"unknown size {self.size!r} (sizes: {', '.join(SIZES)})")
        self.spec = SIZES[self.size]
        self.seed = int(self.options.get("seed", 0))

    def sizes(self) -> list[str]:
        return list(SIZES)

    # -- host stages -----------------------------------------------------------
    def parse(self, request: bytes) -> Request:
        try:
            obj = json.loads(request)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"request is not JSON: {e}") from None
        if not isinstance(obj, dict):
            raise ValueError("request must be a JSON object")
        doc = _field(obj, "document", dict, "request")
        schema = _field(obj, "schema", dict, "request")
        kind = _field(doc, "type", str, "document")
        if kind != "text":
            raise ValueError(f"document.type {kind!r} is not supported by this task")
        raw = _field(schema, "choices", list, "schema")
        if not 2 <= len(raw) <= self.spec.max_choices:
            raise ValueError(f"schema.choices: need 2..{self.spec.max_choices} choices, got {len(raw)}")
        choices = []
        for i, c in enumerate(raw):
            if not isinstance(c, dict):
                raise ValueError(f"schema.choices[{i}]: expected object")
            choices.append(Choice(_field(c, "label", str, f"schema.choices[{i}]"),
                                  str(c.get("description", ""))))
        if len({c.label for c in choices}) != len(choices):
            raise ValueError("schema.choices: labels must be unique")
        return Request(id=str(obj.get("id", "")), text=_field(doc, "text", str, "document"),
                       question=str(schema.get("question", "")), choices=tuple(choices))

    def preprocess(self, request: Request) -> tuple[np.ndarray, ...]:
        s = self.spec
        ids = [CLS] + tokenize(request.question, s.vocab) + [SEP] + tokenize(request.text, s.vocab)
        ids = ids[: s.max_tokens]
        tokens = np.zeros((1, s.max_tokens), np.int64)
        tokens[0, : len(ids)] = ids
        mask = np.zeros((1, s.max_tokens), np.float32)
        mask[0, : len(ids)] = 1.0
        ctok = np.zeros((1, s.max_choices, s.choice_tokens), np.int64)
        cmask = np.zeros((1, s.max_choices, s.choice_tokens), np.float32)
        for i, c in enumerate(request.choices):
            cid = tokenize(c.label.replace("_", " ") + " : " + c.description, s.vocab)
            cid = cid[: s.choice_tokens]
            ctok[0, i, : len(cid)] = cid
            cmask[0, i, : len(cid)] = 1.0
        return tokens, mask, ctok, cmask

    def reduce(self, outputs: dict[str, np.ndarray], request: Request) -> dict[str, Any]:
        logits = outputs["logits"][0, : len(request.choices)].astype(np.float32)
        z = np.exp(logits - logits.max())
        probs = z / z.sum()
        return {"probabilities": probs, "best": int(np.argmax(probs))}

    def answer(self, reduced: dict[str, Any], request: Request) -> dict[str, Any]:
        probs = reduced["probabilities"]
        return {
            "id": request.id,
            "answer": request.choices[reduced["best"]].label,
            "probabilities": {c.label: round(float(p), 6) for c, p in zip(request.choices, probs)},
        }

    def serialize(self, answer: dict[str, Any]) -> bytes:
        return json.dumps(answer, separators=(",", ":")).encode()

    # -- cases, model, accuracy -------------------------------------------------
    def cases(self) -> list[Case]:
        root = resources.files("benchbox.tasks.decision") / "fixtures"
        return [Case(n, (root / f"{n}.json").read_bytes()) for n in CASE_NAMES]

    def build_model(self) -> Any:
        import torch

        from benchbox.tasks.decision.model import build

        return build(self.spec, self.seed, getattr(torch, self.dtype))

    def probabilities(self, reduced: Any) -> np.ndarray | None:
        return reduced["probabilities"]

    def answer_key(self, answer: Any) -> Any:
        return answer["answer"]

    def info(self) -> dict[str, Any]:
        d = super().info()
        d["spec"] = self.spec.__dict__
        d["seed"] = self.seed
        return d
