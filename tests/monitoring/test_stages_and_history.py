"""Stage attribution of both chains, and the history helper the monitoring tests seed with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conveyor.monitoring.stages import stage_map
from tests.monitoring.history import Profile, Story, path, seed, stream
from tests.support.workflows import declaration

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def test_default_chain_stages():
    assert stage_map(declaration("supplier_exceptions")) == {
        "received": "gate",
        "validated": "model",
        "ai_processed": "approval",
        "approved": "publish",
        "quarantined": "review",
        "pending_review": "review",
        "pending_approval": "review",
        "corrected": "review",  # corrected input waiting to be validated again by its run
    }


def test_invoice_chain_stages_put_extraction_and_classification_on_the_model():
    assert stage_map(declaration("invoice_processing")) == {
        "received": "model",  # extraction
        "extracted": "gate",
        "validated": "model",  # classification
        "classified": "approval",
        "approved": "publish",
        "paid": "publish",
        "quarantined": "review",
        "pending_review": "review",
        "pending_approval": "review",
        "corrected": "review",  # corrected input waiting to be validated again by its run
    }


def test_seed_writes_what_the_ledger_reads(ledger):
    steps = [
        ("received", T0),
        ("validated", T0 + timedelta(minutes=1)),
        ("pending_review", T0 + timedelta(minutes=3)),
    ]
    seed(
        ledger,
        "supplier_exceptions",
        [Story("K1", "run-1", {"supplier_id": "SUP-1"}, steps, reason="low confidence")],
    )

    item = ledger.get("supplier_exceptions:K1")
    assert (item.status, item.run_id, item.reason, item.created_at) == (
        "pending_review",
        "run-1",
        "low confidence",
        T0,
    )
    assert [(t.from_status, t.to_status, t.at) for t in ledger.history("supplier_exceptions:K1")] == [
        (None, "received", T0),
        ("received", "validated", T0 + timedelta(minutes=1)),
        ("validated", "pending_review", T0 + timedelta(minutes=3)),
    ]
    # The ledger itself accepts the next step from there: the seeded item is a real one.
    assert ledger.transition(
        "supplier_exceptions", ["supplier_exceptions:K1"], to_status="ai_processed", actor="t"
    ).moved


def test_seed_refuses_a_history_the_ledger_could_not_have_written(ledger):
    with pytest.raises(ValueError, match="does not allow received -> published"):
        seed(
            ledger,
            "supplier_exceptions",
            [
                Story("K2", "r", {}, [("received", T0), ("published", T0)]),
            ],
        )
    with pytest.raises(ValueError, match="before"):
        seed(
            ledger,
            "supplier_exceptions",
            [
                Story("K3", "r", {}, [("received", T0), ("validated", T0 - timedelta(seconds=1))]),
            ],
        )
    assert ledger.count_by_status() == {}


@pytest.mark.parametrize("workflow", ["supplier_exceptions", "invoice_processing"])
@pytest.mark.parametrize("detour", [None, "gate", "model"])
def test_generated_paths_walk_the_whole_chain(workflow, detour):
    import random

    steps = path(workflow, T0, Profile(), detour, random.Random(1))
    flow = declaration(workflow)
    assert steps[0][0] == "received" and steps[-1][0] == flow.done
    assert all(flow.allows(a, b) for (a, _), (b, _) in zip(steps, steps[1:], strict=False))
    assert ("quarantined" in dict(steps)) == (detour == "gate")
    assert ("pending_review" in dict(steps)) == (detour == "model")


def test_stream_cuts_items_at_as_of():
    as_of = T0 + timedelta(days=2)
    stories = stream("supplier_exceptions", as_of=as_of, days=2, profile=Profile(per_day=50))
    assert 90 <= len(stories) <= 110
    assert all(at < as_of for s in stories for _, at in s.steps)
    assert any(s.steps[-1][0] != "published" for s in stories)  # the last ones are still in flight
