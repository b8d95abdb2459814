"""Health numbers from the ledger's audit trail, on a small history whose every number is known."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conveyor.monitoring import metrics
from conveyor.monitoring.snapshot import DurationStats, SourceRate, WaitingItem
from tests.monitoring.history import Story, seed

AS_OF = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
WF = "supplier_exceptions"
H, M = timedelta(hours=1), timedelta(minutes=1)


def _normal(key: str, run: str, supplier: str, t0: datetime) -> Story:
    """gate 1 min, model 2 min, approval 20 min, publish 5 min: 28 min end to end."""
    return Story(
        key,
        run,
        {"supplier_id": supplier},
        [
            ("received", t0),
            ("validated", t0 + M),
            ("ai_processed", t0 + 3 * M),
            ("approved", t0 + 23 * M),
            ("published", t0 + 28 * M),
        ],
    )


@pytest.fixture
def small_history(ledger):
    t_b = AS_OF - 5 * H
    stories = [
        _normal("A", "r-today", "SUP-1", AS_OF - 10 * H),
        # B: doubtful model output, one hour in review, then the rest of the chain.
        Story(
            "B",
            "r-today",
            {"supplier_id": "SUP-2"},
            [
                ("received", t_b),
                ("validated", t_b + M),
                ("pending_review", t_b + 3 * M),
                ("ai_processed", t_b + 63 * M),
                ("approved", t_b + 83 * M),
                ("published", t_b + 88 * M),
            ],
        ),
        # C: quarantined by the gate three hours ago, nobody has looked at it.
        Story(
            "C",
            "r-today",
            {"supplier_id": "SUP-2"},
            [
                ("received", AS_OF - 3 * H),
                ("quarantined", AS_OF - 3 * H + M),
            ],
            reason="column amount missing",
        ),
        # D: yesterday's window; E: in flight at the model.
        _normal("D", "r-yesterday", "SUP-1", AS_OF - 30 * H),
        Story(
            "E",
            "r-today",
            {"supplier_id": "SUP-3"},
            [("received", AS_OF - 2 * H), ("validated", AS_OF - 2 * H + M)],
        ),
    ]
    seed(ledger, WF, stories)
    return ledger


def test_measure_counts_each_number_from_the_audit_trail(small_history):
    health = metrics.measure(small_history, WF, as_of=AS_OF)

    assert health.done_status == "published"
    assert health.throughput.current == 2
    assert health.throughput.previous == (1, 0, 0, 0, 0, 0, 0)
    assert health.throughput.baseline == 0
    assert health.throughput.received_by_status == {"published": 2, "quarantined": 1, "validated": 1}

    ex = health.exceptions
    assert (ex.received, ex.exceptions, ex.rate) == (4, 2, 0.5)
    assert (ex.baseline_received, ex.baseline_exceptions, ex.baseline_rate) == (1, 0, 0.0)
    assert ex.trend[-1].label == "current" and ex.trend[-1].rate == 0.5
    assert ex.trend[-2].label == "d1" and ex.trend[-2].received == 1
    assert ex.sources[0] == SourceRate(
        source="SUP-2",
        received=2,
        exceptions=2,
        rate=1.0,
        baseline_received=0,
        baseline_exceptions=0,
        baseline_rate=None,
    )
    assert {s.source for s in ex.sources} == {"SUP-1", "SUP-2", "SUP-3"}


def test_cycle_time_is_split_by_stage(small_history):
    cycle = metrics.measure(small_history, WF, as_of=AS_OF).cycle
    now = cycle.current

    assert now.items == 2
    # A: 28 min; B: 28 min + 60 min in review.
    assert now.total.p50 == pytest.approx((28 + 88) / 2 * 60)
    assert now.total.p95 == pytest.approx(28 * 60 + 0.95 * 60 * 60)
    assert now.stages["review"] == DurationStats(p50=1800.0, p95=pytest.approx(3420.0), mean=1800.0, waited=1)
    assert now.stages["model"].p50 == 120.0 and now.stages["model"].waited == 2
    assert now.stages["gate"].mean == 60.0
    assert now.stages["approval"].mean == 1200.0
    assert now.stages["publish"].mean == 300.0
    assert cycle.baseline.items == 1
    assert cycle.baseline.total.p50 == 28 * 60


def test_queue_now_and_at_an_earlier_moment(small_history):
    queue = metrics.measure(small_history, WF, as_of=AS_OF).queue
    assert queue.size == 1
    assert queue.oldest_age_s == pytest.approx((3 * H - M).total_seconds())
    assert queue.over_bound == 0
    assert queue.by_status == {"quarantined": 1}
    assert queue.oldest == (
        WaitingItem(
            item_id="supplier_exceptions:C",
            status="quarantined",
            age_s=pytest.approx(10740.0),
            reason="column amount missing",
            run_id="r-today",
        ),
    )
    assert queue.window_start_size == 0 and queue.previous_sizes == (0,) * 7

    # Four and a half hours earlier B waited in review (it left an hour after entering); C did not exist.
    earlier = metrics.measure(small_history, WF, as_of=AS_OF - 4.5 * H).queue
    assert earlier.size == 1
    assert earlier.oldest[0].item_id == "supplier_exceptions:B"
    assert earlier.oldest_age_s == pytest.approx((0.5 * H - 3 * M).total_seconds())

    # With a one-hour bound, C is over it.
    tight = metrics.measure(small_history, WF, as_of=AS_OF, queue_age_bound_hours=1).queue
    assert tight.over_bound == 1


def test_run_progress_counts_done_of_received(small_history):
    runs = metrics.run_progress(small_history, WF, as_of=AS_OF)
    assert [r["run_id"] for r in runs] == ["r-today", "r-yesterday"]
    today = runs[0]
    assert (today["received"], today["done"], today["in_review"], today["stopped"], today["in_flight"]) == (
        4,
        2,
        1,
        0,
        1,
    )
    assert today["progress"] == 0.5
    assert runs[1]["progress"] == 1.0
    only = metrics.run_progress(small_history, WF, as_of=AS_OF, run_id="r-yesterday")
    assert [r["run_id"] for r in only] == ["r-yesterday"]


def test_series_buckets_every_number(small_history):
    s = metrics.series(small_history, WF, as_of=AS_OF, days=2, bucket_hours=12)
    points = s["points"]
    assert [p["end"] for p in points][-1] == AS_OF.isoformat()
    assert [p["throughput"] for p in points] == [0, 1, 0, 2]
    assert [p["queue_size"] for p in points] == [0, 0, 0, 1]
    assert points[-1]["exception_rate"] == 0.5 and points[1]["exception_rate"] == 0.0
    assert points[-1]["stage_mean"]["review"] == 1800.0
    assert points[0]["cycle_p95"] is None and points[0]["exception_rate"] is None


def test_active_workflows_lists_only_recent_activity(small_history):
    assert metrics.active_workflows(small_history, since=AS_OF - 48 * H) == [WF]
    assert metrics.active_workflows(small_history, since=AS_OF + H) == []
