"""De-duplication of alerts in the ledger: fire once, repeat after renotify, resolve after a clear spell."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from conveyor.monitoring.alerts import Alert
from conveyor.monitoring.snapshot import HealthSnapshot, Throughput
from conveyor.monitoring.store import MonitoringStore, Policy

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
POLICY = {"wf_a": Policy(renotify=timedelta(hours=24), resolve_after=timedelta(hours=2))}


def _alert(rule: str = "queue_age", workflow: str = "wf_a", subject: str = "", title: str = "t") -> Alert:
    return Alert(
        rule=rule,
        workflow=workflow,
        severity="warning",
        title=title,
        what="w",
        change="c",
        compared_with="b",
        where=("x",),
        subject=subject,
    )


@pytest.fixture
def store(ledger) -> MonitoringStore:
    return MonitoringStore(ledger)


def _run(
    store: MonitoringStore, at: datetime, *alerts: Alert, send: bool = True
) -> list[tuple[str, str, str]]:
    events = store.reconcile(list(alerts), workflows=["wf_a"], as_of=at, policies=POLICY)
    if send:
        for event in events:
            assert store.mark_sent(event, ["email"])
    return [(e.kind, e.alert.rule, e.alert.subject) for e in events]


def test_a_condition_is_sent_once_then_again_after_renotify(store):
    assert _run(store, T0, _alert()) == [("fired", "queue_age", "")]
    for hour in range(1, 24):
        assert _run(store, T0 + hour * H, _alert()) == [], f"re-sent after {hour} h"
    assert _run(store, T0 + 24 * H, _alert()) == [("repeated", "queue_age", "")]
    state = store.open_alerts("wf_a")
    assert len(state) == 1 and state[0]["notifications"] == 2 and state[0]["opened_at"] == T0


def test_a_different_subject_is_a_different_condition(store):
    assert _run(store, T0, _alert("cycle_time", subject="review")) == [("fired", "cycle_time", "review")]
    # The bottleneck moved to the model: that is news; the review condition clears later.
    assert _run(store, T0 + H, _alert("cycle_time", subject="model")) == [("fired", "cycle_time", "model")]


def test_resolution_waits_for_a_clear_spell_and_is_announced(store):
    _run(store, T0, _alert())
    assert _run(store, T0 + H) == []  # clear for one hour only: still open, nothing sent
    assert _run(store, T0 + 2 * H, _alert()) == []  # back: the same alert, not a new one
    assert _run(store, T0 + 3 * H) == []
    assert _run(store, T0 + 4 * H) == [("resolved", "queue_age", "")]
    assert store.open_alerts("wf_a") == []
    # It comes back later: a new alert.
    assert _run(store, T0 + 5 * H, _alert()) == [("fired", "queue_age", "")]


def test_an_unsent_notification_is_retried_by_the_next_evaluation(store):
    first = store.reconcile([_alert()], workflows=["wf_a"], as_of=T0, policies=POLICY)
    assert [e.kind for e in first] == ["fired"]  # ... and every channel failed: never marked sent
    second = store.reconcile([_alert()], workflows=["wf_a"], as_of=T0 + H, policies=POLICY)
    assert [e.kind for e in second] == ["fired"]
    states = {e.id: e.state for e in store.events(workflow="wf_a")}
    assert states == {first[0].id: "superseded", second[0].id: "pending"}
    assert store.mark_sent(second[0], ["email"]) and not store.mark_sent(second[0], ["email"])
    assert _run(store, T0 + 2 * H, _alert()) == []


def test_a_condition_never_sent_is_resolved_silently(store):
    store.reconcile([_alert()], workflows=["wf_a"], as_of=T0, policies=POLICY)
    assert _run(store, T0 + 3 * H) == []
    assert store.open_alerts("wf_a") == []


def test_workflows_not_evaluated_keep_their_alerts(store):
    _run(store, T0, _alert(workflow="wf_a"))
    events = store.reconcile([], workflows=["wf_b"], as_of=T0 + 5 * H, policies=POLICY)
    assert events == [] and len(store.open_alerts("wf_a")) == 1


def test_snapshots_are_recorded_once_per_workflow_and_hour(store):
    snap = HealthSnapshot(workflow="wf_a", as_of=T0, done_status="published", throughput=Throughput(current=3))
    store.save_snapshots([snap])
    again = dataclasses.replace(snap, throughput=Throughput(current=4))  # a re-run of the same hour
    store.save_snapshots([again])
    assert store.snapshots("wf_a", since=T0 - H, until=T0 + H) == [again]
