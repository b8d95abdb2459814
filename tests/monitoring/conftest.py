"""A recent history for the CLI, API and page tests: an ordinary workflow and one with a review backlog."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from conveyor.ledger import Ledger
from conveyor.monitoring.health import evaluate_all, measure_all
from conveyor.monitoring.stages import Stage
from tests.monitoring.history import Story, seed, stream
from tests.monitoring.scenarios import BASE, switch

#: A source name carrying markup: every view must show it as text.
MARKUP_SOURCE = "<img src=x onerror=\"document.title='pwned'\">SUP-X"


@dataclass(frozen=True)
class Recent:
    ledger: Ledger
    as_of: datetime


@pytest.fixture
def recent(ledger) -> Recent:
    """Eight days up to now: ``supplier_exceptions`` as usual, ``wf_queue`` with reviewers falling behind.

    The health rules have been evaluated once, so ``wf_queue`` has open alerts.
    """
    as_of = datetime.now(UTC).replace(second=0, microsecond=0)
    seed(
        ledger,
        "supplier_exceptions",
        stream("supplier_exceptions", as_of=as_of, profile=BASE.but(per_day=60)),
    )
    busy = BASE.but(per_day=150, exception_share=0.10)
    seed(
        ledger,
        "wf_queue",
        stream(
            "wf_queue",
            as_of=as_of,
            profile=switch(
                as_of - timedelta(hours=36), busy.but(waits={Stage.REVIEW: timedelta(hours=16)}), busy
            ),
        ),
    )
    t0 = as_of - timedelta(hours=2)
    seed(
        ledger,
        "wf_queue",
        [
            Story(
                f"MARKUP-{n}",
                "manual__markup",
                {"supplier_id": MARKUP_SOURCE},
                [("received", t0), ("quarantined", t0 + timedelta(minutes=1))],
                reason="<b>bold</b> reason",
            )
            for n in range(6)  # enough exceptions to lead the sources table
        ],
    )
    measured = measure_all(ledger, {"*": {}}, as_of=as_of)
    evaluate_all(ledger, measured.snapshots, {"*": {}}, as_of=as_of)
    return Recent(ledger, as_of)
