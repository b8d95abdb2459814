"""The steps' XComs are a contract: DAG authors read them downstream by key, so their shapes are
pinned here. A key added is a change a user can see (say it in the README); a key gone breaks DAGs."""

from __future__ import annotations

import json

from conveyor.ai.summary import AIStepSummary
from conveyor.gate.results import GateSummary
from conveyor.monitoring.metrics import utc
from conveyor.monitoring.snapshot import HealthSnapshot, Queue, WaitingItem
from conveyor.review.review_summary import ReviewSummary
from conveyor.review.run_state import RunReviewState

GATE_KEYS = {
    "workflow", "run_id", "step", "source", "suite", "input_hash", "rows", "validated", "quarantined",
    "duplicates", "conflicts", "already_received", "unexpected_columns", "exception_rate", "status", "rerun",
}  # fmt: skip
AI_KEYS = {
    "workflow", "run_id", "step", "model", "fallback_model", "from_status", "to_status", "items", "passed",
    "review", "spot_checked", "spot_check", "spot_seed", "failed", "review_reasons", "failure_reasons",
    "calls", "cache_hits", "fallback_used", "raced", "seconds",
}  # fmt: skip
HEALTH_KEYS = {
    "workflow": None, "as_of": None, "window_hours": None, "baseline_days": None, "done_status": None,
    "throughput": {"current", "previous", "baseline", "change", "received", "received_by_status"},
    "exceptions": {"received", "exceptions", "rate", "baseline_received", "baseline_exceptions", "baseline_rate",
                   "approvals", "approval_rate", "trend", "source_field", "sources"},
    "cycle": {"current", "baseline"},
    "queue": {"size", "oldest_age_s", "over_bound", "bound_s", "by_status", "oldest", "window_start_size",
              "previous_sizes", "baseline_size"},
    "accuracy": None,
}  # fmt: skip
REVIEW_KEYS = {
    "workflow", "run_id", "needed_review", "decided", "pending", "decided_by", "outcomes", "outcome",
    "escalation", "escalation_applied", "auto_rejected", "item_escalations", "caught_up", "waited_seconds",
    "deadline",
}  # fmt: skip


def test_the_gate_summary_keeps_its_keys_and_travels_as_json():
    summary = GateSummary(workflow="w", run_id="r", step="gate", source="in.csv", suite="s", input_hash="h", rows=3)
    xcom = summary.as_xcom()
    assert set(xcom) == GATE_KEYS
    assert GateSummary.from_json(json.loads(json.dumps(xcom))) == summary


def test_the_ai_step_summary_keeps_its_keys_sharded_or_not_and_names_an_open_breaker():
    common = dict(workflow="w", run_id="r", step="classify", model="local", fallback_model=None,
                  from_status="validated", to_status="ai_processed", review_reasons={"low_confidence": 2})  # fmt: skip
    assert set(AIStepSummary(**common).as_xcom()) == AI_KEYS
    sharded = AIStepSummary(**common, sharded=True, shard=2, claimed=200).as_xcom()
    assert set(sharded) == AI_KEYS | {"shard", "claimed"} and (sharded["shard"], sharded["claimed"]) == (2, 200)
    stopped = AIStepSummary(**common, breaker="breaker open for conveyor_llm").as_xcom()
    assert set(stopped) == AI_KEYS | {"breaker"}
    assert json.loads(json.dumps(stopped)) == stopped  # plain JSON: XCom and the API can carry it


def test_the_review_summary_keeps_its_keys_and_says_what_the_escalation_did():
    state = RunReviewState(workflow="w", run_id="r", pending=["w:3"], decided_items={"w:1", "w:2"})
    state.decisions[("reviewer:rita", "validated")] += 2
    summary = ReviewSummary.of(state, escalation="reject", escalation_applied="reject", auto_rejected=1,
                               caught_up=["classify"], deadline="2026-12-06T10:00:00+00:00")  # fmt: skip
    xcom = summary.as_xcom()
    assert set(xcom) == REVIEW_KEYS
    assert (xcom["needed_review"], xcom["decided"], xcom["pending"], xcom["outcome"]) == (3, 2, 1, "timed_out")
    assert xcom["decided_by"] == {"reviewer:rita": 2} and xcom["caught_up"] == ["classify"]
    assert json.loads(json.dumps(xcom)) == xcom
    assert "escalation 'reject' moved 1 item(s)" in summary.describe()


def test_the_health_snapshot_keeps_its_keys_and_reads_back_typed_from_json():
    waiting = WaitingItem(item_id="w:1", status="quarantined", age_s=90.0, reason="amount missing", run_id="r")
    queue = Queue(size=1, oldest_age_s=90.0, by_status={"quarantined": 1}, oldest=(waiting,))
    as_of = utc("2026-12-06T10:00:00+00:00")
    snapshot = HealthSnapshot(workflow="w", as_of=as_of, done_status="published", queue=queue)
    xcom = snapshot.as_xcom()
    assert set(xcom) == set(HEALTH_KEYS)
    assert {name: set(xcom[name]) for name, keys in HEALTH_KEYS.items() if keys} == {
        name: keys for name, keys in HEALTH_KEYS.items() if keys
    }
    assert set(xcom["cycle"]["current"]) == {"items", "total", "stages"}
    assert xcom["as_of"] == "2026-12-06T10:00:00+00:00" and xcom["queue"]["oldest"][0]["item_id"] == "w:1"
    travelled = json.loads(json.dumps(xcom))
    assert travelled == xcom  # plain JSON: lists, strings and numbers only
    assert HealthSnapshot.from_xcom(travelled) == snapshot
