"""Measure the reduced-precision error of the eager model against the float32 reference.

``python -m benchbox.tasks.decision.precision [SIZE ...] [KEY=VALUE ...]`` prints, per
size and dtype, the worst logit and probability error over all cases and any answer that
differs: the figures the gate defaults in ``task.py`` were set from.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def precision_errors(size: str, dtype: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Worst |logit| and |probability| error of ``dtype`` vs float32, eager on the CPU, all cases."""
    import torch

    from benchbox.tasks.decision.task import DecisionTask

    opts = dict(options or {})
    ref = DecisionTask(size=size, options=opts)
    low = DecisionTask(size=size, dtype=dtype, options=opts)
    m_ref, m_low = ref.build_model(), low.build_model()
    worst_logit = worst_prob = 0.0
    flips: list[str] = []
    for case in ref.cases():
        req = ref.parse(case.request)
        x = [torch.from_numpy(a) for a in ref.preprocess(req)]
        with torch.inference_mode():
            a, b = m_ref(*x)[0].numpy(), m_low(*x)[0].numpy()
        pa = ref.reduce({"logits": a}, req)
        pb = low.reduce({"logits": b}, req)
        worst_logit = max(worst_logit, float(np.abs(a.astype(np.float64) - b).max()))
        worst_prob = max(worst_prob, float(np.abs(pa["probabilities"].astype(np.float64)
                                                  - pb["probabilities"]).max()))
        if pa["best"] != pb["best"]:
            flips.append(case.name)
    return {"size": size, "dtype": dtype, "logit_max_abs": worst_logit, "prob_max_abs": worst_prob,
            "answers_differ": flips}


def main(argv: list[str]) -> None:  # pragma: no cover
    sizes = [a for a in argv if "=" not in a and not a.startswith("--")] or ["tiny", "small"]
    opts: dict[str, Any] = {}
    for a in argv:
        if "=" in a:
            k, _, v = a.partition("=")
            opts[k] = {"true": True, "false": False}.get(v.lower(), v)
    for size in sizes:
        for dtype in ("bfloat16", "float16"):
            r = precision_errors(size, dtype, opts)
            print(f"{size:<6} {dtype:<9} logit {r['logit_max_abs']:.4g}  prob {r['prob_max_abs']:.4g}  "
                  f"answers differ: {', '.join(r['answers_differ']) or 'none'}")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
