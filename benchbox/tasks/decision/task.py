"""The built-in ``decision`` task: a document plus a schema of choices in, a label out.

A document is text, an image or a video (frames); images and video travel inside
the JSON request as base64 of raw RGB bytes. ``parse`` validates and decodes,
``preprocess`` tokenizes, resizes, normalizes, cuts patches and computes the
interpolated patch positions, all into fixed-shape arrays (padded, with masks).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from benchbox.errors import UsageError, first_line
from benchbox.tasks.base import Case, InputShape, Task
from benchbox.tasks.decision import media
from benchbox.tasks.decision.spec import CASE_NAMES, SIZES

PAD, CLS, SEP = 0, 1, 2
_RESERVED = 3
_WORD = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
MAX_SIDE = 4096
MAX_FRAMES = 256

#: task options: name → (type, default, meaning). Booleans are precision choices recorded in info().
OPTIONS: dict[str, tuple[type, Any, str]] = {
    "seed": (int, None, "seed of the generated weights (default: the size's seed)"),
    "weights": (str, "", "safetensors file with the model's weights (replaces the seeded ones)"),
    "softmax_fp32": (bool, True, "attention softmax evaluated in float32, then rounded to the dtype"),
    "layernorm_fp32": (bool, True, "layer norms evaluated in float32, then rounded to the dtype"),
    "logits_fp32": (bool, True, "the schema head (joint document/choice score) in float32"),
    "pos_interp_round": (bool, True, "patch-position source coordinates snap to multiples of 1/256"),
    "dynamic_tokens": (bool, False, "tokens and token_mask unpadded: their length follows the request "
                                    "(1..max_tokens), a dynamic-shape input for runners that build for "
                                    "shapes"),
}

#: Gate defaults per dtype. Measured (eager on the CPU against the float32 reference, all five
#: cases, sizes tiny and small, default precision options; `python -m benchbox.tasks.decision.precision`):
#:   bfloat16: logit max abs 0.029 (tiny) / 0.040 (small), prob max abs 0.0018 / 0.0015
#:   float16:  logit max abs 0.0012 / 0.0016,             prob max abs 0.00023 / 0.00015
#: With softmax_fp32, layernorm_fp32 and logits_fp32 all false, bfloat16 reaches prob 0.0079 /
#: 0.0053 and float16 logit 0.0029 / 0.0037: the defaults below (about 3-6x the measured
#: errors) accept the careful configuration and catch the careless one in bfloat16.
GATES: dict[str, dict[str, float]] = {
    "float32": {"logit_max_abs": 1e-3, "prob_max_abs": 1e-4},
    "float16": {"logit_max_abs": 1e-2, "prob_max_abs": 1e-3},
    "bfloat16": {"logit_max_abs": 1.5e-1, "prob_max_abs": 6e-3},
}


@dataclass(frozen=True)
class Choice:
    label: str
    description: str


@dataclass(frozen=True)
class Request:
    id: str
    kind: str
    text: str
    question: str
    choices: tuple[Choice, ...]
    #: uint8 [frames, height, width, 3] for image and video documents
    pixels: np.ndarray | None = None


def tokenize(text: str, vocab: int) -> list[int]:
    """Deterministic hashing tokenizer: lower-cased words and symbols → ids."""
    span = vocab - _RESERVED
    return [_RESERVED + zlib.crc32(w.encode()) % span for w in _WORD.findall(text.lower())]


def _field(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in obj:
        raise ValueError(f"{where}: missing '{key}'")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{where}.{key}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _dim(obj: dict[str, Any], key: str, hi: int) -> int:
    v = _field(obj, key, int, "document")
    if not 1 <= v <= hi:
        raise ValueError(f"document.{key}: must be in 1..{hi}, got {v}")
    return v


def _option(options: dict[str, Any], key: str, declared: dict[str, tuple[type, Any, str]]) -> Any:
    kind, default, _ = declared[key]
    v = options.get(key, default)
    if v is None:
        return None
    if kind is bool and isinstance(v, int) and v in (0, 1):
        v = bool(v)
    if kind is str and not isinstance(v, str):
        v = str(v)
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise ValueError(f"task option {key}: expected {kind.__name__}, got {v!r}")
    return v


def _parse_pixels(doc: dict[str, Any], kind: str) -> np.ndarray:
    enc = _field(doc, "encoding", str, "document")
    if enc != "rgb8":
        raise ValueError(f"document.encoding {enc!r} is not supported (rgb8)")
    w, h = _dim(doc, "width", MAX_SIDE), _dim(doc, "height", MAX_SIDE)
    f = _dim(doc, "frames", MAX_FRAMES) if kind == "video" else 1
    data = _field(doc, "data", str, "document")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"document.data: not base64: {e}") from None
    if len(raw) != f * h * w * 3:
        raise ValueError(f"document.data: {len(raw)} bytes, expected {f}×{h}×{w}×3 = {f * h * w * 3}")
    return np.frombuffer(raw, np.uint8).reshape(f, h, w, 3)


class DecisionTask(Task):
    """Structured decision over a text, image or video document: which choice of the schema fits."""

    name = "decision"
    input_names = ("tokens", "token_mask", "patches", "patch_mask", "pos_index", "pos_weight",
                   "frame", "choice_tokens", "choice_mask")
    output_names = ("logits",)
    #: the options the class takes: name → (type, default, meaning); a subclass may declare more
    declared_options: ClassVar[dict[str, tuple[type, Any, str]]] = OPTIONS

    def __post_init__(self) -> None:
        if self.size not in SIZES:
            raise ValueError(f"unknown size {self.size!r} (sizes: {', '.join(SIZES)})")
        declared = self.declared_options
        unknown = sorted(set(self.options) - set(declared))
        if unknown:
            raise ValueError(f"unknown task option {unknown[0]!r} (options: {', '.join(declared)})")
        self.spec = SIZES[self.size]
        self.settings: dict[str, Any] = {k: _option(self.options, k, declared) for k in declared}
        if self.settings["seed"] is None:
            self.settings["seed"] = self.spec.seed
        self.seed = int(self.settings["seed"])
        self.weights_sha256 = ""
        if self.settings["weights"]:
            self.weights_sha256 = self._check_weights(Path(self.settings["weights"]))

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
        if kind not in ("text", "image", "video"):
            raise ValueError(f"document.type {kind!r} is not supported (text, image, video)")
        raw = _field(schema, "choices", list, "schema")
        if not 2 <= len(raw) <= self.spec.max_choices:
            raise ValueError(f"schema.choices: need 2..{self.spec.max_choices} choices, got {len(raw)}")
        choices = []
        for i, c in enumerate(raw):
            if not isinstance(c, dict):
                raise ValueError(f"schema.choices[{i}]: expected object")
            desc = c.get("description", "")
            if not isinstance(desc, str):
                raise ValueError(f"schema.choices[{i}].description: expected str")
            choices.append(Choice(_field(c, "label", str, f"schema.choices[{i}]"), desc))
        if len({c.label for c in choices}) != len(choices):
            raise ValueError("schema.choices: labels must be unique")
        question = schema.get("question", "")
        if not isinstance(question, str):
            raise ValueError("schema.question: expected str")
        if kind == "text":
            text, pixels = _field(doc, "text", str, "document"), None
        else:
            caption = doc.get("caption", "")
            if not isinstance(caption, str):
                raise ValueError("document.caption: expected str")
            text, pixels = caption, _parse_pixels(doc, kind)
        return Request(id=str(obj.get("id", "")), kind=kind, text=text, question=question,
                       choices=tuple(choices), pixels=pixels)

    def preprocess(self, request: Request) -> tuple[np.ndarray, ...]:
        s = self.spec
        ids = [CLS] + tokenize(request.question, s.vocab) + [SEP] + tokenize(request.text, s.vocab)
        ids = ids[: s.max_tokens]
        width = len(ids) if self.settings["dynamic_tokens"] else s.max_tokens
        tokens = np.zeros((1, width), np.int64)
        tokens[0, : len(ids)] = ids
        mask = np.zeros((1, width), np.float32)
        mask[0, : len(ids)] = 1.0
        patches = np.zeros((1, s.max_patches, s.patch_dim), np.float32)
        patch_mask = np.zeros((1, s.max_patches), np.float32)
        pos_index = np.zeros((1, s.max_patches, 4), np.int64)
        pos_weight = np.zeros((1, s.max_patches, 4), np.float32)
        frame = np.zeros((1, s.max_patches), np.int64)
        if request.pixels is not None:
            px = request.pixels
            n_in = px.shape[0]
            n = min(n_in, s.max_frames)
            # temporal sampling: the frame nearest the centre of each of n equal spans
            keep = (np.arange(n) * 2 + 1) * n_in // (2 * n)
            rows, cols = media.fit_grid(px.shape[2], px.shape[1], s.max_patches // n)
            frames = media.resize(px[keep], rows * s.patch, cols * s.patch)
            flat = media.patchify(media.normalize(frames), s.patch)
            k = flat.shape[0]
            patches[0, :k] = flat
            patch_mask[0, :k] = 1.0
            idx, w = media.position_weights(rows, cols, s.native_grid, self.settings["pos_interp_round"])
            pos_index[0, :k] = np.tile(idx, (n, 1))
            pos_weight[0, :k] = np.tile(w, (n, 1))
            frame[0, :k] = np.repeat(np.arange(n), rows * cols)
        ctok = np.zeros((1, s.max_choices, s.choice_tokens), np.int64)
        cmask = np.zeros((1, s.max_choices, s.choice_tokens), np.float32)
        for i, c in enumerate(request.choices):
            cid = tokenize(c.label.replace("_", " ") + " : " + c.description, s.vocab)
            cid = cid[: s.choice_tokens]
            ctok[0, i, : len(cid)] = cid
            cmask[0, i, : len(cid)] = 1.0
        return tokens, mask, patches, patch_mask, pos_index, pos_weight, frame, ctok, cmask

    def reduce(self, outputs: dict[str, np.ndarray], request: Request) -> dict[str, Any]:
        return self.decide(self.logits(outputs, request))

    @staticmethod
    def logits(outputs: dict[str, np.ndarray], request: Request) -> np.ndarray:
        """The request's choices' logits, in float32."""
        return outputs["logits"][0, : len(request.choices)].astype(np.float32)

    @staticmethod
    def decide(logits: np.ndarray) -> dict[str, Any]:
        """The reduced output: the choices' probabilities and the best one."""
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

    def precision(self) -> Any:
        from benchbox.tasks.decision.model import Precision

        return Precision(softmax_fp32=self.settings["softmax_fp32"],
                         layernorm_fp32=self.settings["layernorm_fp32"],
                         logits_fp32=self.settings["logits_fp32"])

    def build_model(self, device: str = "cpu") -> Any:
        """The model at ``self.dtype``; ``device="meta"`` builds it without allocating."""
        import torch

        from benchbox.tasks.decision.model import build

        model = build(self.spec, self.seed, getattr(torch, self.dtype), self.precision(), device)
        model.dynamic_tokens = bool(self.settings["dynamic_tokens"])
        if self.settings["weights"] and device != "meta":
            from benchbox.tasks.decision.weights import load_safetensors

            path = Path(self.settings["weights"])
            try:
                state = load_safetensors(path)
                model.load_state_dict({k: v.to(getattr(torch, self.dtype)) for k, v in state.items()},
                                      strict=True)
            except (OSError, ValueError, RuntimeError) as e:
                raise UsageError(f"task option weights={path}: {first_line(e)}") from None
        return model

    def input_shapes(self) -> dict[str, InputShape]:
        """Fixed shapes; with ``dynamic_tokens`` the token inputs take 1..max_tokens tokens (tuned
        for the first case's length)."""
        shapes = super().input_shapes()
        if self.settings["dynamic_tokens"]:
            opt = shapes["tokens"].opt
            for name in ("tokens", "token_mask"):
                shapes[name] = InputShape((1, 1), opt, (1, self.spec.max_tokens))
        return shapes

    def size_detail(self) -> str:
        s = self.spec
        return (f"dim {s.dim}, {s.layers} layers, {s.heads} heads, {s.max_tokens} tokens + "
                f"{s.max_patches} patches of {s.patch}×{s.patch}, "
                f"native grid {s.native_grid}×{s.native_grid}")

    def parameter_count(self) -> int:
        """Counted from the size's shapes: nothing is built or allocated (and torch is not imported)."""
        from benchbox.tasks.decision.spec import parameter_count

        return parameter_count(self.spec)

    def _check_weights(self, path: Path) -> str:
        """Keys and shapes of a weights file against the model; ValueError with one line if not."""
        from benchbox.tasks.decision.weights import read_header

        header = read_header(path)
        expected = {k: tuple(v.shape) for k, v in self.build_model(device="meta").state_dict().items()}
        missing = sorted(set(expected) - set(header))
        extra = sorted(set(header) - set(expected))
        if missing:
            raise ValueError(f"weights={path}: missing {len(missing)} tensor(s), first {missing[0]!r}")
        if extra:
            raise ValueError(f"weights={path}: {len(extra)} unexpected tensor(s), first {extra[0]!r}")
        for k, shape in expected.items():
            got = tuple(header[k]["shape"])
            if got != shape:
                raise ValueError(f"weights={path}: tensor {k!r} has shape {list(got)}, "
                                 f"the {self.size} model needs {list(shape)}")
        return hashlib.sha256(path.read_bytes()).hexdigest()

    def default_gates(self) -> dict[str, float]:
        return dict(GATES[self.dtype])

    def probabilities(self, reduced: Any) -> np.ndarray | None:
        return reduced["probabilities"]

    def answer_key(self, answer: Any) -> Any:
        return answer["answer"]

    def info(self) -> dict[str, Any]:
        d = super().info()
        # the options as understood, those at their default left out: naming a default asks
        # what leaving it out asks, and the receipts (and a diff of them) say so
        defaults = {k: v[1] for k, v in self.declared_options.items()} | {"seed": self.spec.seed}
        d["options"] = {k: v for k, v in self.settings.items() if v != defaults[k]}
        d["spec"] = self.spec.__dict__
        d["seed"] = self.seed
        d["precision"] = {k: self.settings[k] for k in
                          ("softmax_fp32", "layernorm_fp32", "logits_fp32", "pos_interp_round")}
        d["weights"] = ({"path": self.settings["weights"], "sha256": self.weights_sha256}
                        if self.settings["weights"] else "seeded")
        if self.settings["dynamic_tokens"]:
            d["dynamic_tokens"] = True
        return d
