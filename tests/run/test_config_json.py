"""The worker JSON of a RunConfig (how a fresh round process receives it) is generated from the
dataclass's fields: every field, set away from its default, comes back equal and of its type."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from benchbox.run.config import RunConfig, default

CHANGED = dict(contract="model_io_wall", contracts=("model_io_wall", "device_span"), task="pkg.mod:make",
               size="small", dtype="bfloat16", runners=("torch-eager",), cases=("invoice", "video"),
               device="cuda:1", threads=3, warmup=2, samples=90, repeats=3, fresh_processes=False,
               gc_mode="off", layout="fixed", target_ci=0.5,
               max_samples=77, max_time_s=4.5, gap_ms=0.25, rate_per_s=12.0,
               idle="busy", max_backlog=9, max_queue_ms=8.5, settle_s=1.5, case_time_limit_s=30.0,
               out=Path("r/x.json"), overwrite=True, baseline="torch-eager",
               runner_options={"torch-eager": {"stream": True}}, task_options={"k": 1, "s": "v"},
               gates={"max_prob_error": 0.1}, labels={"a": "b"}, command=("benchbox", "run"))


def test_every_field_is_set_away_from_its_default_here() -> None:
    names = {f.name for f in dataclasses.fields(RunConfig)}
    assert set(CHANGED) == names
    assert all(CHANGED[n] != default(n) for n in names)


def test_every_field_round_trips_through_the_worker_json_with_its_type() -> None:
    cfg = RunConfig(**CHANGED)
    back = RunConfig.from_json(json.loads(json.dumps(cfg.to_json(), allow_nan=False)))
    assert back == cfg
    for f in dataclasses.fields(RunConfig):
        assert type(getattr(back, f.name)) is type(getattr(cfg, f.name)), f.name


def test_a_config_built_in_code_with_a_wrongly_typed_scalar_is_refused_before_running() -> None:
    """A config built in code gets the checks one read from a file gets: 0 is not a switch and 5.0
    not a count (they would be written into the receipt's settings, which its reader refuses)."""
    import pytest

    from benchbox.errors import FieldError

    for field, value, said in (("fresh_processes", 0, "true or false"), ("warmup", 5.0, "a whole number"),
                               ("samples", True, "a whole number"), ("max_time_s", "9", "a number"),
                               ("device", None, "a string")):
        with pytest.raises(FieldError, match=f"must be {said}, got {value!r}") as e:
            RunConfig(runners=["torch-eager"], **{field: value}).validate()
        assert e.value.field == field
    RunConfig(runners=["torch-eager"], case_time_limit_s=30, settle_s=0).validate()  # an int is a number
