"""The figures README.md and docs/ state agree with what they come from (benchmarks/readme_claims.py):
committed receipts and results, and the code's own constants. The claims that need a slow rerun
(the change-point benchmark, the main job's time) are checked by ``python -m
benchmarks.readme_claims --rerun``, not here."""

from __future__ import annotations

import pytest

from benchmarks import readme_claims as rc

CHEAP = [c for c in rc.CLAIMS if not c.rerun]


@pytest.mark.parametrize("claim", CHEAP, ids=lambda c: c.name)
def test_each_figure_agrees_with_its_source(claim: rc.Claim) -> None:
    assert rc.problem(claim) is None


def test_a_changed_figure_or_a_lost_sentence_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    claim = rc.CLAIMS_BY_NAME["arrival changes model_io_wall"]
    real = rc.text_of(claim.file)
    assert "from 80 µs back to back to 584 µs" in real
    monkeypatch.setattr(rc, "text_of", lambda file: real.replace("to 584 µs", "to 635 µs"))
    said = rc.problem(claim)
    assert said is not None and "says 80, 635, 10" in said and "gives 80, 584, 10" in said
    monkeypatch.setattr(rc, "text_of", lambda file: real.replace("with 20 ms of sleep", "with a nap"))
    assert "its sentence is not in README.md any more" in (rc.problem(claim) or "")


def test_numeric_claims_compare_numbers_as_written() -> None:
    claim = rc.CLAIMS_BY_NAME["accuracy gates"]
    assert rc.stated(claim) == ("1e-3", "1e-4", "1e-2", "1e-3", "0.15", "0.006")
    assert rc.problem(claim) is None


def test_every_claim_names_a_file_that_states_it_and_the_slow_ones_say_how_to_rerun() -> None:
    assert len(CHEAP) >= 10
    for c in rc.CLAIMS:
        assert rc.stated(c) is not None, c.name
        if c.rerun:
            assert c.source.startswith("python -m benchmarks."), c.source
