"""Spot checks: a share of the passing answers goes to a person anyway, drawn reproducibly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conveyor.ai.runner import StepConfig, run_step
from conveyor.ai.spot_checks import check_settings, drawn, spot_seed
from conveyor.monitoring import metrics
from conveyor.review.cards import checks_of
from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION
from tests.ai.seeding import exception_rows, seed_exceptions

WORKFLOW = "supplier_exceptions"


def config(run_id: str, **overrides) -> StepConfig:
    return StepConfig.of(
        workflow=WORKFLOW, run_id=run_id, task=CLASSIFY_EXCEPTION, actor="ai_tests.classify#1", **overrides
    )


def test_a_share_of_passing_answers_goes_to_review_marked_as_spot_checks(ledger):
    rows = exception_rows()
    seed_exceptions(ledger, "r1", rows)

    summary = run_step(ledger, config("r1", spot_check=0.2, max_error_rate=0.05, batch_size=50))

    seed = spot_seed(WORKFLOW, "r1", "classify_exception")
    assert summary["spot_seed"] == seed and summary["spot_check"] == 0.2
    waiting = ledger.items(workflow=WORKFLOW, run_id="r1", status="pending_review", limit=None)
    spot = [i for i in waiting if "checked at random" in (i.reason or "")]
    doubtful = [i for i in waiting if i not in spot]
    # Counted apart: review is the exceptions only, spot checks their own count.
    assert summary["spot_checked"] == len(spot) > 0
    assert summary["review"] == len(doubtful)
    passed = ledger.items(workflow=WORKFLOW, run_id="r1", status="ai_processed", limit=None)
    assert summary["passed"] == len(passed)
    # The draw is the seed's: exactly the passing answers the seed picks, whoever computes it.
    passing = {i.item_id for i in passed} | {i.item_id for i in spot}
    assert {i.item_id for i in spot} == {i for i in passing if drawn(seed, i, 0.2)}
    assert 0.1 < len(spot) / len(passing) < 0.3
    item = spot[0]
    assert item.confidence >= 0.7 and item.review_target == "ai_processed"
    assert item.reason == (
        f"passed with confidence {item.confidence:.2f}; checked at random (spot check of 20% of passing answers)"
    )
    # what the review page lists for it (the queue's "checks" of the item)
    assert checks_of(item) == [
        f"passed with confidence {item.confidence:.2f}", "checked at random (spot check of 20% of passing answers)"
    ]
    routed = ledger.history(item.item_id)[-1]
    assert routed.detail == {
        "ai_step": "classify_exception", "confidence": item.confidence, "failed_checks": [],
        "spot_check": True, "share": 0.2, "seed": seed,
    }  # fmt: skip
    low = next(i for i in doubtful if i.confidence is not None and i.confidence < 0.7)
    assert ledger.history(low.item_id)[-1].detail["failed_checks"] == ["low_confidence"]

    now = datetime.now(UTC)
    tallies = ledger.ai_tallies(WORKFLOW, since=now - timedelta(hours=1), until=now + timedelta(hours=1))
    assert {t.seed for t in tallies} == {seed} and {t.max_error_rate for t in tallies} == {0.05}
    assert sum(t.passed for t in tallies) == len(passed)
    assert sum(t.spot_checked for t in tallies) == len(spot)
    assert sum(t.exceptions for t in tallies) == len(doubtful)
    assert sum(sum(t.passed_by_confidence) for t in tallies) == len(passing)
    # Every passing answer is at or above the threshold: no bucket below 70 holds one.
    assert all(sum(t.passed_by_confidence[:70]) == 0 for t in tallies)
    # The health numbers count spot checks apart from the exception rate.
    health = metrics.measure(ledger, WORKFLOW, as_of=now + timedelta(minutes=1), window_hours=1, baseline_days=1)
    assert health.exceptions.received == len(rows)
    assert health.exceptions.exceptions == len(doubtful)


def test_a_second_attempt_draws_the_same_items_and_counts_nothing_twice(ledger):
    seed_exceptions(ledger, "r2", exception_rows(60))
    first = run_step(ledger, config("r2", spot_check=0.3))
    again = run_step(ledger, config("r2", spot_check=0.3))  # a retry or clear: nothing left waiting

    assert again["items"] == 0 and again["spot_seed"] == first["spot_seed"]
    now = datetime.now(UTC)
    tallies = ledger.ai_tallies(WORKFLOW, since=now - timedelta(hours=1), until=now + timedelta(hours=1))
    assert sum(t.passed + t.spot_checked + t.exceptions for t in tallies) == 60


def test_without_spot_checks_nothing_that_passed_waits_for_a_person(ledger):
    seed_exceptions(ledger, "r3", exception_rows(60))
    summary = run_step(ledger, config("r3"))
    assert summary["spot_checked"] == 0
    waiting = ledger.items(workflow=WORKFLOW, run_id="r3", status="pending_review", limit=None)
    assert not [i for i in waiting if "checked at random" in (i.reason or "")]


@pytest.mark.parametrize(
    ("spot_check", "max_error_rate", "named"),
    [(1.0, None, "spot_check"), (-0.1, None, "spot_check"), (0.02, 0.0, "max_error_rate"), (0.02, 2, "max_error_rate")],
)
def test_settings_that_cannot_be_meant_are_refused_naming_the_parameter(spot_check, max_error_rate, named):
    with pytest.raises(ValueError, match=rf"^{named} must be"):
        check_settings(spot_check, max_error_rate)
