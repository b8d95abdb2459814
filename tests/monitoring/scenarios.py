"""Eight days of realistic history per workflow, each shaped to one health problem (or none)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from conveyor.ledger import Ledger
from conveyor.monitoring.stages import Stage
from tests.monitoring.history import Profile, Story, seed, stream

H = timedelta(hours=1)
DAY = timedelta(days=1)
BASE = Profile()  # 200 items a day, 5% exceptions, ~28 min from entry to completion

#: The gate's reason for the item nobody reviewed; it carries markup, as item data may.
OLD_REASON = "column `supplier_id` missing; found `vendor_id` <script>alert(1)</script>"


def switch(at: datetime, after: Profile, before: Profile = BASE) -> Callable[[datetime], Profile]:
    """``before`` for items received before ``at``, ``after`` from then on."""
    return lambda received_at: after if received_at >= at else before


def seed_problem_workflows(ledger: Ledger, as_of: datetime) -> dict[str, set[tuple[str, str]]]:
    """Seed one workflow per problem; returns workflow -> the (rule, subject) alerts it must raise."""
    expected: dict[str, set[tuple[str, str]]] = {}

    def add(
        workflow: str, profile: Profile | Callable[[datetime], Profile], alerts: set[tuple[str, str]]
    ) -> None:
        seed(ledger, workflow, stream(workflow, as_of=as_of, profile=profile))
        expected[workflow] = alerts

    add("wf_steady", BASE, set())
    # Completions fall to a trickle today: a 90%+ drop.
    add("wf_drop", switch(as_of - DAY, BASE.but(per_day=4)), {("throughput_drop", "")})
    # The extract stopped yesterday evening: nothing received, nothing completed.
    add("wf_zero", switch(as_of - 26 * H, BASE.but(per_day=0)), {("zero_output", "")})
    # Items keep arriving but the model never answers: received, not completed.
    add("wf_stuck", switch(as_of - 26 * H, BASE.but(waits={Stage.MODEL: 10 * DAY})), {("zero_output", "")})
    # Exception rate 5% -> 25%, driven by one supplier.
    hot = {**BASE.sources, "SUP-0042": 10 / 3}
    add(
        "wf_exc",
        switch(
            as_of - DAY,
            BASE.but(sources=hot, source_exception_share={"SUP-0042": 0.85}),
            BASE.but(sources={**BASE.sources, "SUP-0042": 1.1}),
        ),
        {("exception_rate", "")},
    )
    # Reviewers stopped keeping up 36 h ago: the review queue grows, the model is as fast as ever.
    busy = BASE.but(per_day=300, exception_share=0.10)
    add(
        "wf_queue",
        switch(as_of - 36 * H, busy.but(waits={Stage.REVIEW: 16 * H}), busy),
        {("cycle_time", "review"), ("queue_growth", "")},
    )
    # The model slowed down today (2 min -> 90 min per item): the model is the bottleneck.
    add(
        "wf_model", switch(as_of - DAY, BASE.but(waits={Stage.MODEL: 90 * H / 60})), {("cycle_time", "model")}
    )
    # A healthy workflow with one item quarantined three days ago that nobody reviewed.
    add("wf_old", BASE, {("queue_age", "")})
    t0 = as_of - 3 * DAY
    seed(
        ledger,
        "wf_old",
        [
            Story(
                "OLD-1",
                "scheduled__old",
                {"supplier_id": "SUP-0007"},
                [("received", t0), ("quarantined", t0 + timedelta(minutes=1))],
                reason=OLD_REASON,
            ),
        ],
    )
    return expected


def seed_healthy_week(ledger: Ledger, as_of: datetime) -> dict[str, list[Story]]:
    """The two bundled workflows on an ordinary week (each with its own chain and source field)."""
    out = {}
    for workflow in ("supplier_exceptions", "invoice_processing"):
        stories = stream(workflow, as_of=as_of, profile=BASE, key_prefix=workflow[:3].upper())
        seed(ledger, workflow, stories)
        out[workflow] = stories
    return out
