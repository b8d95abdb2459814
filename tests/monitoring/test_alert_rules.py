"""The alert rules on realistic history: which alerts fire for which problem, and what they say."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conveyor.monitoring.alert_text import render_html, render_text
from conveyor.monitoring.alerts import Alert, Thresholds
from conveyor.monitoring.health import evaluate_all, measure_all
from tests.monitoring.scenarios import OLD_REASON, seed_healthy_week, seed_problem_workflows

AS_OF = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
CONFIG = {"*": {}}


@pytest.fixture(scope="module")
def problems(ledger_dsn):
    from conveyor.ledger import Ledger, workflows
    from tests.conftest import truncate_ledger

    truncate_ledger(ledger_dsn)
    workflows.forget()  # what this process remembers declaring went with the truncated tables
    ledger = Ledger(ledger_dsn)
    expected = seed_problem_workflows(ledger, AS_OF)
    measured = measure_all(ledger, CONFIG, as_of=AS_OF)
    alerts, events = evaluate_all(
        ledger, measured.snapshots, CONFIG, as_of=AS_OF, base_url="http://airflow.test"
    )
    return expected, measured, alerts, events


def test_each_problem_raises_exactly_its_alerts(problems):
    expected, measured, alerts, events = problems
    assert sorted(s.workflow for s in measured.snapshots) == sorted(expected)
    found: dict[str, set[tuple[str, str]]] = {w: set() for w in expected}
    for alert in alerts:
        found[alert.workflow].add((alert.rule, alert.subject))
    assert found == expected
    assert sorted((e.kind, e.alert.key) for e in events) == sorted(("fired", a.key) for a in alerts)


def _one(alerts: list[Alert], workflow: str, rule: str) -> Alert:
    [alert] = [a for a in alerts if a.workflow == workflow and a.rule == rule]
    return alert


def test_alerts_say_what_moved_by_how_much_against_what_and_where(problems):
    _, measured, alerts, _ = problems
    snaps = {s.workflow: s for s in measured.snapshots}

    drop = _one(alerts, "wf_drop", "throughput_drop")
    assert drop.value <= 0.1 * drop.baseline and drop.baseline >= 180
    assert (
        "down 9" in drop.change and "median" in drop.compared_with and "previous 7 days" in drop.compared_with
    )
    assert "http://airflow.test/conveyor/health?workflow=wf_drop" in " ".join(drop.where)

    zero = _one(alerts, "wf_zero", "zero_output")
    assert zero.severity == "critical" and "no item was received" in zero.what
    stuck = _one(alerts, "wf_stuck", "zero_output")
    assert "none completed" in stuck.what and "validated" in stuck.what

    exc = _one(alerts, "wf_exc", "exception_rate")
    assert 0.2 <= exc.value <= 0.3 and exc.baseline <= 0.08
    assert exc.where[0].startswith("driven by supplier_id SUP-0042")
    assert snaps["wf_exc"].exceptions.sources[0].source == "SUP-0042"

    review = _one(alerts, "wf_queue", "cycle_time")
    assert review.subject == "review" and "bottleneck: review" in review.title
    assert "model p95 2 min (was 2 min, flat)" in review.compared_with
    growth = _one(alerts, "wf_queue", "queue_growth")
    assert growth.value >= 10 and growth.baseline <= 2
    assert "model p95" in growth.compared_with and "flat" in growth.compared_with
    assert "the review queue, not the model" in growth.where[0]

    model = _one(alerts, "wf_model", "cycle_time")
    assert model.subject == "model" and "the AI step" in model.where[0]
    assert "review p95" in model.compared_with

    old = _one(alerts, "wf_old", "queue_age")
    assert "wf_old:OLD-1" in old.what and old.value >= 71 * 3600 and "3.0 d" in old.title
    assert "conveyor review wf_old:OLD-1" in " ".join(old.where)


def test_item_data_is_escaped_in_the_html_mail(problems):
    _, _, alerts, _ = problems
    old = _one(alerts, "wf_old", "queue_age")
    assert OLD_REASON in render_text(old)
    body = render_html(old)
    assert "<script>" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_a_healthy_week_raises_nothing(ledger):
    seed_healthy_week(ledger, AS_OF)
    config = {"*": {}, "invoice_processing": {"source_field": "vendor_id"}}
    measured = measure_all(ledger, config, as_of=AS_OF)
    alerts, events = evaluate_all(ledger, measured.snapshots, config, as_of=AS_OF)
    assert [s.workflow for s in measured.snapshots] == ["invoice_processing", "supplier_exceptions"]
    assert alerts == [] and events == []
    invoice = measured.snapshots[0]
    assert invoice.done_status == "archived" and invoice.exceptions.source_field == "vendor_id"
    assert 180 <= invoice.throughput.current <= 220


def test_thresholds_merge_and_reject_typos():
    config = {"*": {"window_hours": 12}, "wf": {"exception_rate_bound": 0.3}}
    assert Thresholds.for_workflow(config, "wf") == Thresholds(window_hours=12, exception_rate_bound=0.3)
    assert Thresholds.for_workflow(config, "other").exception_rate_bound == 0.15
    with pytest.raises(ValueError, match="exception_rate_bund"):
        Thresholds.for_workflow({"*": {"exception_rate_bund": 0.2}}, "wf")


def test_a_corrected_item_no_review_step_validates_is_alerted_with_what_to_do(ledger):
    """A reviewer corrected a quarantined row after its run had finished: no review step waits to
    validate it again. It counts as waiting, and the queue-age alert names it and says to clear the
    run's review step."""
    from datetime import timedelta

    from tests.monitoring.history import Story, seed, stream
    from tests.monitoring.scenarios import BASE

    seed(ledger, "wf_late", stream("wf_late", as_of=AS_OF, profile=BASE, key_prefix="L"))
    t0 = AS_OF - timedelta(days=2)
    seed(ledger, "wf_late", [Story("FIXED-1", "manual__late", {"supplier_id": "SUP-0007"},
                                   [("received", t0), ("quarantined", t0 + timedelta(minutes=1)),
                                    ("corrected", t0 + timedelta(hours=1))])])  # fmt: skip
    measured = measure_all(ledger, CONFIG, as_of=AS_OF)
    alerts, _ = evaluate_all(ledger, measured.snapshots, CONFIG, as_of=AS_OF)

    old = _one(alerts, "wf_late", "queue_age")
    assert "wf_late:FIXED-1 (corrected, 47.0 h)" in old.what
    assert any("clear its review step in Airflow" in line for line in old.where), old.where
