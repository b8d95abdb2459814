"""Every way of deciding wakes the waiting review step at once (issue 21, point 2).

The review trigger polls every 60 s (``review_poke_seconds=60``), as in production; each decision
(one item over the API, a selection and a filter over the API as the page sends them, the CLI by
ids and with ``--all``) must end its wait within 5 s: the decision's NOTIFY wakes it, not the poll.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from conveyor.review.triggers import HumanReviewTrigger
from tests.review.conftest import route_to_review

WF = "supplier_exceptions"
BASE = "/conveyor/api/review"
CONVEYOR = str(Path(sys.executable).with_name("conveyor"))


@pytest.fixture(scope="module")
def rita(api_server):
    client = api_server.client("rita")
    yield client
    client.close()


def _api_single(rita, ledger, ids):
    for item_id in ids:
        done = rita.post(f"{BASE}/items/{quote(item_id, safe='')}/decision", json={"action": "reject"})
        assert done.status_code == 200, done.text


def _api_selection(rita, ledger, ids):
    done = rita.post(f"{BASE}/decisions", json={"action": "approve", "item_ids": ids})
    assert done.status_code == 200 and len(done.json()["decided"]) == len(ids), done.text


def _api_filter(rita, ledger, ids):
    done = rita.post(f"{BASE}/decisions", json={"action": "approve", "filter": {"workflow": WF, "run_id": "run-w"}})
    assert done.status_code == 200 and len(done.json()["decided"]) == len(ids), done.text


def _cli(*argv: str) -> None:
    done = subprocess.run([CONVEYOR, *argv], capture_output=True, text=True, env=dict(os.environ), timeout=60)
    assert done.returncode == 0, done.stderr


def _cli_ids(rita, ledger, ids):
    _cli("--dsn", ledger.dsn, "review", *ids, "--approve", "--by", "carol")


def _cli_all(rita, ledger, ids):
    _cli("--dsn", ledger.dsn, "review", "--all", "--workflow", WF, "--run", "run-w", "--approve", "--by", "carol")


WAYS = {"api-single": _api_single, "api-selection": _api_selection, "api-filter (the page)": _api_filter,
        "cli-ids": _cli_ids, "cli-all": _cli_all}  # fmt: skip


@pytest.mark.parametrize("way", list(WAYS))
def test_a_decision_wakes_the_waiting_review_step_within_5s_with_a_60s_poll(rita, ledger, way):
    route_to_review(ledger, WF, "run-w", pending=["W1", "W2", "W3"])
    ids = [f"{WF}:W{n}" for n in (1, 2, 3)]
    trigger = HumanReviewTrigger(
        workflow=WF, run_id="run-w", deadline=datetime.now(UTC) + timedelta(seconds=120), poll_interval=60
    )

    async def scenario() -> tuple[object, datetime]:
        waiting = asyncio.create_task(asyncio.wait_for(anext(trigger.run()), 60))
        await asyncio.sleep(1.5)  # it looked once and listens
        assert not waiting.done()
        await asyncio.to_thread(WAYS[way], rita, ledger, ids)
        event = await waiting
        return event, datetime.now(UTC)

    event, woke_at = asyncio.run(scenario())
    # From the decision's own audit time, not from starting the way to decide: a CLI process's start
    # (seconds on a loaded machine) is not the wait being measured.
    decided_at = max(h.at for item_id in ids for h in ledger.history(item_id))
    woke_after = (woke_at - decided_at).total_seconds()
    print(f"{way}: the review step woke {woke_after:.2f} s after the decision (poll 60 s)")
    assert event.payload["status"] == "decided", event.payload
    assert woke_after <= 5, f"{way}: the review step noticed {woke_after:.1f}s after the decision (poll 60 s)"
