"""A reviewer working the review page by keyboard: decisions per minute and latency per decision.

Starts a real ``airflow api-server`` (the Conveyor plugin mounted) on a scratch metadata DB and a
scratch ledger, routes N items of one run to review (most doubtful AI answers, some quarantined),
logs into Airflow in headless Chromium, opens the review page filtered to that run, and decides
``--decisions`` items with the keys only: ``a`` approves, every fifth item is rejected with ``r``,
a typed reason and Enter. Each decision waits until the page shows the next item, as a person
would; the page records, per decision, the milliseconds from the key press to the next item on
screen (the server's guarded decision plus the next item's render, prefetched while reading).

Prints ``METRIC`` lines and ``RATIO`` lines against the goals (>= 40 decisions per minute, <= 300 ms
per decision). Run by hand: ``.venv/bin/python bench/review_page.py [--decisions 100]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from _pg import drop, scratch_database

REPO = Path(__file__).resolve().parents[1]
WF = "review_page_bench"
GOAL_PER_MINUTE = 40.0
GOAL_MS = 300.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    args = parser.parse_args()

    from tests.support import postgres
    from tests.support.airflow_env import create_metadata_db

    stamp = str(int(time.time()))
    ledger_db, meta_db = f"bench_review_page_ledger_{stamp}", f"bench_review_page_meta_{stamp}"
    ledger_dsn = scratch_database(ledger_db)
    work = Path(tempfile.mkdtemp(prefix="conveyor-review-page-"))
    os.environ.update(
        AIRFLOW_HOME=str(work / "airflow"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(work / "dags"),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgres.sqlalchemy_url_for(meta_db),
        AIRFLOW__API_AUTH__JWT_SECRET="conveyor-bench-jwt-secret",
        AIRFLOW_CONN_CONVEYOR_LEDGER=postgres.airflow_conn_uri_for(ledger_db),
    )
    create_metadata_db(meta_db)
    try:
        return _measure(args.decisions, ledger_dsn, work)
    finally:
        if not args.keep:
            drop(ledger_db)
            drop(meta_db)


def _measure(decisions: int, ledger_dsn: str, work: Path) -> int:
    from conveyor import ReviewField, Workflow
    from conveyor.ledger import Ledger
    from conveyor.quickstart.api_server import running_api_server
    from tests.review.conftest import route_to_review
    from tests.support.api import USERS
    from tests.support.browser import chromium_page
    from tests.support.review_page import decide_by_keyboard, log_in, review_frame

    ledger = Ledger(ledger_dsn)
    ledger.upgrade()
    ledger.declare(
        Workflow(
            name=WF,
            review_card=(
                ReviewField("supplier", kind="label"),
                ReviewField("amount", kind="amount"),
                ReviewField("ai_result.summary", label="summary", kind="long"),
            ),
            priority_field="amount",
        ),
        actor="bench",
    )
    total = decisions + 20
    keys = [f"PO-{n:05d}" for n in range(total)]
    payloads = {k: {"supplier": f"Supplier {n % 17}", "amount": 100 + (n * 7919) % 20000} for n, k in enumerate(keys)}
    route_to_review(
        ledger, WF, "bench-run", pending=keys[: total * 4 // 5], quarantined=keys[total * 4 // 5 :], payloads=payloads
    )

    page_path = f"/conveyor/review/?workflow={WF}&run_id=bench-run"
    with running_api_server(work / "api", USERS) as server, chromium_page(1440, 900) as page:
        # The plugin's menu page inside the Airflow UI, then filtered to the run as its tab would be.
        log_in(page, server.url, "rita", "/plugin/conveyor-review")
        frame = review_frame(page)
        frame.goto(server.url + page_path)
        frame.wait_for_selector("#queue tbody tr")
        run = decide_by_keyboard(page, frame, decisions)
    decided = sum(
        n for s, n in ledger.count_by_status(workflow=WF).items() if s in ("ai_processed", "validated", "rejected")
    )
    print(f"METRIC decisions={run.decisions} seconds={run.seconds:.1f} errors={run.errors} ledger_decided={decided}")
    print(f"METRIC decisions_per_minute={run.per_minute:.1f}")
    print(f"METRIC latency_ms median={run.median_ms:.0f} p95={run.p95_ms:.0f} max={max(run.latencies_ms):.0f}")
    print(f"RATIO decisions_per_minute/goal={run.per_minute / GOAL_PER_MINUTE:.2f} (goal >= 1)")
    print(
        f"RATIO median_latency/goal={run.median_ms / GOAL_MS:.2f} "
        f"p95_latency/goal={run.p95_ms / GOAL_MS:.2f} (goal <= 1)"
    )
    print(json.dumps({"latencies_ms": [round(x) for x in run.latencies_ms]}))
    ok = decided == decisions and run.errors == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
