"""The decision model's sizes as plain data, and their parameter counts from the shapes alone.

torch-free: ``benchbox tasks`` lists every size without building (or importing) a model.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the built-in task's cases (fixtures), in order
CASE_NAMES = ("invoice", "outage", "receipt", "image", "video")


@dataclass(frozen=True)
class ModelSpec:
    """Shape of one model size; ``parameters`` is the stated count (a test checks it)."""

    vocab: int
    dim: int
    layers: int
    heads: int
    ffn: int
    max_tokens: int
    max_choices: int
    choice_tokens: int
    patch: int
    native_grid: int
    max_patches: int
    max_frames: int
    parameters: int
    #: default seed of the generated weights: chosen so that on every case the float32 top-two
    #: logit gap exceeds twice the measured bfloat16 logit error (no coin-flip answers)
    seed: int = 0

    @property
    def patch_dim(self) -> int:
        return 3 * self.patch * self.patch

    @property
    def sequence(self) -> int:
        return self.max_tokens + self.max_patches


SIZES: dict[str, ModelSpec] = {
    # CI on a CPU: a default run of every case on two runners takes well under a minute
    "tiny": ModelSpec(vocab=4096, dim=64, layers=2, heads=4, ffn=128, max_tokens=128, max_choices=8,
                      choice_tokens=16, patch=16, native_grid=4, max_patches=96, max_frames=8,
                      parameters=396_545),
    "small": ModelSpec(vocab=8192, dim=256, layers=4, heads=4, ffn=1024, max_tokens=256, max_choices=8,
                       choice_tokens=16, patch=16, native_grid=8, max_patches=256, max_frames=8,
                       parameters=5_669_377, seed=2),
    "base": ModelSpec(vocab=16384, dim=512, layers=8, heads=8, ffn=2048, max_tokens=384, max_choices=8,
                      choice_tokens=16, patch=16, native_grid=16, max_patches=384, max_frames=8,
                      parameters=34_860_033, seed=1),
    # GPU: 1024-long sequences through 24 layers of width 1024, so compute dominates on an H200
    "large": ModelSpec(vocab=32768, dim=1024, layers=24, heads=16, ffn=4096, max_tokens=512,
                       max_choices=8, choice_tokens=16, patch=16, native_grid=24, max_patches=512,
                       max_frames=8, parameters=339_875_841),
}




def parameter_count(spec: ModelSpec) -> int:
    """The parameters of :class:`~benchbox.tasks.decision.model.DecisionModel` at ``spec``, from shapes.

    Mirrors the model's layers one by one (a test checks it against the built model).
    """
    d, f = spec.dim, spec.ffn

    def linear(n_in: int, n_out: int) -> int:
        return n_in * n_out + n_out

    norm = 2 * d
    block = norm + linear(d, 3 * d) + linear(d, d) + norm + linear(d, f) + linear(f, d)
    embeddings = (spec.vocab * d + spec.max_tokens * d + linear(spec.patch_dim, d)
                  + spec.native_grid * spec.native_grid * d + spec.max_frames * d)
    head = norm + linear(d, d) + linear(d, d) + linear(d, 1)
    return embeddings + spec.layers * block + head
