"""Image and video handling for the decision task, and the generator of its media fixtures.

Pixels travel inside the JSON request as base64 of raw ``uint8`` RGB bytes
(row-major, ``frames × height × width × 3``) next to ``width``/``height``/``frames``.
Resizing is bilinear with half-pixel centres (the usual ``align_corners=False``
convention), computed in float64 and rounded explicitly (half up) back to ``uint8``,
so every implementation that follows these rules gets identical pixels.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np

#: per-channel normalization (the common ImageNet statistics)
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
#: interpolation source coordinates snap to multiples of 1/POS_GRID when rounding is on
POS_GRID = 256


def interp_matrix(n_out: int, n_in: int) -> np.ndarray:
    """[n_out, n_in] bilinear weights, half-pixel centres, edges clamped."""
    src = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    src = np.clip(src, 0.0, n_in - 1)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w1 = src - i0
    m = np.zeros((n_out, n_in), np.float64)
    rows = np.arange(n_out)
    np.add.at(m, (rows, i0), 1.0 - w1)
    np.add.at(m, (rows, i1), w1)
    return m


def resize(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize of ``[F, H, W, 3]`` uint8 frames to ``[F, height, width, 3]`` uint8."""
    f, h, w, _ = frames.shape
    ry = interp_matrix(height, h)
    rx = interp_matrix(width, w)
    x = frames.astype(np.float64).transpose(0, 3, 1, 2)          # F, 3, H, W
    y = ry @ x @ rx.T                                             # F, 3, height, width
    y = np.floor(y + 0.5)                                         # explicit rounding: half up
    return np.clip(y, 0, 255).astype(np.uint8).transpose(0, 2, 3, 1)


def fit_grid(width: int, height: int, budget: int) -> tuple[int, int]:
    """The largest patch grid (rows, cols) with the image's aspect ratio and rows·cols ≤ budget.

    Exact integer arithmetic: cols = ⌊√(budget·w/h)⌋, rows = ⌊√(budget·h/w)⌋.
    """
    cols = max(1, math.isqrt(budget * width // height))
    rows = min(budget, max(1, math.isqrt(budget * height // width)))
    cols = min(cols, max(1, budget // rows))
    return rows, cols


def normalize(frames: np.ndarray) -> np.ndarray:
    """uint8 RGB → float32, scaled to [0, 1] and standardized per channel."""
    return (frames.astype(np.float32) * np.float32(1.0 / 255.0) - MEAN) / STD


def patchify(frames: np.ndarray, patch: int) -> np.ndarray:
    """``[F, rows·p, cols·p, 3]`` → ``[F·rows·cols, 3·p·p]`` (channel-major inside a patch)."""
    f, h, w, c = frames.shape
    rows, cols = h // patch, w // patch
    x = frames.reshape(f, rows, patch, cols, patch, c).transpose(0, 1, 3, 5, 2, 4)
    return x.reshape(f * rows * cols, c * patch * patch)


def _axis(n: int, native: int, rounded: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src = (np.arange(n, dtype=np.float64) + 0.5) * (native / n) - 0.5
    src = np.clip(src, 0.0, native - 1)
    if rounded:
        src = np.floor(src * POS_GRID + 0.5) / POS_GRID
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, native - 1)
    return i0, i1, src - i0


def position_weights(rows: int, cols: int, native: int, rounded: bool) -> tuple[np.ndarray, np.ndarray]:
    """Bilinear interpolation of a native ``native × native`` position table to a rows × cols grid.

    Returns ``index`` [rows·cols, 4] (rows of the flattened native table) and ``weight``
    [rows·cols, 4] float32. On the native grid the weights are exactly (1, 0, 0, 0).
    With ``rounded`` the source coordinates snap to multiples of 1/256 first, so every
    weight is a product of two such multiples: exact in float32 and independent of how
    a runtime evaluates the coordinate formula.
    """
    y0, y1, wy = _axis(rows, native, rounded)
    x0, x1, wx = _axis(cols, native, rounded)
    y0, y1, wy = y0[:, None], y1[:, None], wy[:, None]
    index = np.stack([y0 * native + x0, y0 * native + x1, y1 * native + x0, y1 * native + x1], -1)
    weight = np.stack([(1 - wy) * (1 - wx), (1 - wy) * wx, wy * (1 - wx), wy * wx], -1)
    return index.reshape(-1, 4), weight.reshape(-1, 4).astype(np.float32)


def encode(frames: np.ndarray) -> str:
    """uint8 frames → base64 text for a request."""
    return base64.b64encode(np.ascontiguousarray(frames, np.uint8).tobytes()).decode("ascii")


# -- the fixture media: synthetic, deterministic pictures --------------------------------


def _rect(img: np.ndarray, y: int, x: int, h: int, w: int, color: tuple[int, int, int]) -> None:
    img[max(y, 0):y + h, max(x, 0):x + w] = color


def _noise(shape: tuple[int, ...], seed: int, amp: int) -> np.ndarray:
    """Integer hash noise in [-amp, amp]: identical on every platform and numpy version."""
    idx = np.arange(int(np.prod(shape)), dtype=np.uint64).reshape(shape)
    h = (idx + np.uint64(seed)) * np.uint64(0x9E3779B97F4A7C15)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return (h % np.uint64(2 * amp + 1)).astype(np.int64) - amp


def delivery_note(seed: int = 7, width: int = 96, height: int = 64) -> np.ndarray:
    """A photographed delivery note: page, letterhead, logo, text lines, a table and a stamp."""
    yy, xx = np.mgrid[0:height, 0:width]
    # off-white paper under uneven light (integer arithmetic throughout)
    shade = 236 - (18 * xx) // width - (10 * yy) // height
    img = np.stack([shade, shade - 3, shade - 10], -1).astype(np.int64)
    _rect(img, 3, 4, 7, width - 8, (38, 62, 110))                 # letterhead band
    img[(yy - 6) ** 2 + (xx - 10) ** 2 <= 9] = (236, 170, 40)     # logo
    for i, n in enumerate((58, 41, 63, 30, 47)):                  # address and reference lines
        _rect(img, 14 + 4 * i, 6, 2, n, (70, 70, 76))
    for r in range(5):                                            # the item table
        _rect(img, 35 + 5 * r, 6, 1, width - 12, (120, 120, 128))
    for c in (6, 40, 62, width - 7):
        _rect(img, 35, c, 21, 1, (120, 120, 128))
    for r, (a, b) in enumerate(((22, 14), (17, 9), (26, 18), (13, 11))):
        _rect(img, 37 + 5 * r, 9, 2, a, (60, 60, 66))             # item, quantity
        _rect(img, 37 + 5 * r, 64, 2, b, (60, 60, 66))
    d2 = (yy - 52) ** 2 + (xx - 78) ** 2
    img[(d2 >= 34) & (d2 <= 66)] = (40, 80, 190)                  # "RECEIVED" stamp
    img = img + _noise(img.shape, seed, 4)                        # sensor noise
    return np.clip(img, 0, 255).astype(np.uint8)[None]


def latency_dashboard(seed: int = 11, frames: int = 8, width: int = 64, height: int = 48) -> np.ndarray:
    """A screen recording of a latency dashboard while an incident starts."""
    out = np.empty((frames, height, width, 3), np.uint8)
    yy, xx = np.mgrid[0:height, 0:width]
    base = 40 + (np.arange(width) * 7) % 5                        # a jittery baseline
    for t in range(frames):
        img = np.zeros((height, width, 3), np.int64)
        img[...] = (22, 26, 34)                                   # dark theme
        _rect(img, 0, 0, 5, width, (44, 50, 64))                  # title bar
        for gy in range(10, 40, 7):                               # chart grid
            _rect(img, gy, 2, 1, 44, (40, 46, 58))
        level = base + np.where(np.arange(width) > 44 - 5 * t, 4 * t, 0)
        for x in range(2, 46):                                    # the p99 line, rising
            y = int(np.clip(38 - (level[x] * 35) // 100, 8, 38))
            img[y, x] = (90, 200, 250) if t < 4 else (250, 120, 90)
        lamp = (60, 200, 90) if t < 3 else ((230, 60, 50) if t % 2 else (120, 30, 30))
        img[(yy - 12) ** 2 + (xx - 55) ** 2 <= 12] = lamp         # status lamp
        _rect(img, 22, 50, 2 + 2 * t, 10, (230, 160, 40))         # error-rate gauge
        _rect(img, 42, 2, 3, 10 + 6 * t, (200, 200, 210))         # ticker text
        img = img + _noise(img.shape, seed + 1000 * t, 2)
        out[t] = np.clip(img, 0, 255).astype(np.uint8)
    return out


CHOICES_IMAGE = [
    {"label": "receiving", "description": "goods arriving at the warehouse, delivery notes"},
    {"label": "accounts_payable", "description": "supplier invoices and bills that must be paid"},
    {"label": "procurement", "description": "purchase orders and supplier selection"},
    {"label": "legal", "description": "contracts, disputes and regulatory notices"},
]
CHOICES_VIDEO = [
    {"label": "it_operations", "description": "service outages, incidents and infrastructure"},
    {"label": "security", "description": "breaches, phishing and access problems"},
    {"label": "customer_support", "description": "customer complaints and questions"},
    {"label": "facilities", "description": "buildings, power and office equipment"},
    {"label": "product", "description": "feature requests and design feedback"},
]


def _media_request(request_id: str, kind: str, px: np.ndarray, moving: dict[str, object], caption: str,
                   choices: list[dict[str, str]]) -> dict[str, object]:
    """A media case as a JSON object: ``px`` (frames, height, width, 3) as rgb8, with ``moving``
    (a video's frame count and rate) after its size."""
    return {
        "id": request_id,
        "document": {
            "type": kind, "encoding": "rgb8", "width": int(px.shape[2]),
            "height": int(px.shape[1]), **moving, "data": encode(px), "caption": caption,
        },
        "schema": {"question": "Which team should process this document?", "choices": choices},
    }


def image_request() -> dict[str, object]:
    """The ``image`` case as a JSON object."""
    return _media_request("dock-photo-0193", "image", delivery_note(), {},
                          "Photo of a paper delivery note handed over at loading dock 3, "
                          "stamped received, for 12 pallets of motor driver boards.", CHOICES_IMAGE)


def video_request() -> dict[str, object]:
    """The ``video`` case as a JSON object."""
    px = latency_dashboard()
    return _media_request("screen-capture-2207", "video", px, {"frames": int(px.shape[0]), "fps": 1.0},
                          "Screen recording of the checkout latency dashboard attached to a page: "
                          "p99 latency climbs and the status lamp turns red.", CHOICES_VIDEO)


def write_fixtures(root: Path) -> list[Path]:
    """(Re)write the media fixtures; byte-identical on every machine."""
    paths = []
    for name, obj in (("image", image_request()), ("video", video_request())):
        p = root / f"{name}.json"
        p.write_text(json.dumps(obj, indent=2) + "\n")
        paths.append(p)
    return paths


if __name__ == "__main__":  # pragma: no cover
    for p in write_fixtures(Path(__file__).parent / "fixtures"):
        print(p)
