"""One workflow end to end, intake to published, on N items; and the same work one item per task.

The supplier-exception workflow (``conveyor_examples``, built on ``conveyor.__all__``) on a
generated extract of N rows (default 100k), with the embedded model, against a scratch ledger:

1. gate (``open_gate``: validation, items received and routed in one write);
2. review of the quarantined rows by a scripted reviewer (one bulk decision by filter);
3. AI step (``run_step``, embedded classifier + drafter);
4. review of the doubtful drafts (one bulk approval by filter);
5. ``PromoteItemsOperator.execute()`` (ai_processed -> approved);
6. ``PublishOperator.execute()`` (the report from the example's template; approved -> published).

The steps run in this process, their ``execute()`` or the runner that ``execute()`` calls, on a
real ledger (no scheduler: Airflow's start-up and the review wait are not the tasks' own time
and are reported apart). Items/s is counted over the tasks' own time (1, 3, 5, 6); the
reviewer's time apart. Each step's peak RSS is read in a child process of its own.

Side by side on ``--mapped-items`` items (default 1,000): the same work written as one mapped
task instance per item, i.e. every step once per item with its own setup (a 1-row gate input,
a 1-item AI step, promote, publish), in-process — without Airflow's own per-task-instance cost
(a process, a scheduler round trip), so the real mapped DAG is slower still.

Run: ``.venv/bin/python bench/e2e.py [--items 100000] [--mapped-items 1000]``
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "dags"))
os.environ.setdefault("AIRFLOW__CONVEYOR__INCLUDE_FOLDER", str(REPO / "include"))
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
os.environ.setdefault("CONVEYOR_HOME", str(REPO / ".conveyor"))

WF = "supplier_exceptions"
AS_OF = datetime(2026, 11, 30, 6, tzinfo=UTC)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def context(run_id: str, task_id: str) -> dict:
    """What the steps read of an Airflow context."""
    return {
        "run_id": run_id,
        "ti": SimpleNamespace(dag_id=WF, task_id=task_id, try_number=1, map_index=-1),
        "dag_run": SimpleNamespace(run_after=AS_OF, run_id=run_id),
        "dag": SimpleNamespace(fileloc=str(REPO / "dags" / "supplier_exceptions.py")),
    }


# -- the steps -------------------------------------------------------------------------------------


def gate(path: Path, run_id: str, *, batch_checks: bool = True) -> dict:
    """:param batch_checks: False for a one-row input, whose freshness says nothing of the feed."""
    import dataclasses

    from gate import gate_config

    from conveyor.gate.runner import open_gate
    from conveyor.ledger import Ledger

    config = gate_config(path, 250_000, run_id)
    if not batch_checks:
        config = dataclasses.replace(config, max_age=None)
    summary = open_gate(config, Ledger(), actor=f"{WF}.validate#1").run()
    return {"validated": summary.validated, "quarantined": summary.quarantined}


def review(run_id: str, status: str, action: str) -> dict:
    """The scripted reviewer: one bulk decision by filter ("all matching" on the page, or
    ``POST /conveyor/api/review/decisions`` with a filter): each item its own guarded move and audit row."""
    from conveyor.ledger import Ledger
    from conveyor.review.bulk import QueueFilter
    from conveyor.review.review_queue import ReviewQueue

    outcome = ReviewQueue(Ledger()).decide_many(
        None, action, reviewer="bench", comment="scripted", where=QueueFilter(workflows=[WF], run_id=run_id,
                                                                              status=status)
    )  # fmt: skip
    return {"decided": len(outcome.decided)}


def ai(run_id: str) -> dict:
    from conveyor.ai.runner import StepConfig, run_step
    from conveyor.ledger import Ledger
    from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION

    summary = run_step(
        Ledger(),
        StepConfig.of(workflow=WF, run_id=run_id, task=CLASSIFY_EXCEPTION, actor=f"{WF}.classify#1",
                   batch_size=5000, min_confidence=0.5),
    )  # fmt: skip
    return {"items": summary["items"], "passed": summary["passed"], "review": summary["review"]}


def promote(run_id: str) -> dict:
    from conveyor import PromoteItemsOperator
    from conveyor_examples.supplier_exceptions import SUPPLIER_EXCEPTIONS

    op = PromoteItemsOperator(task_id="approve_items", workflow=SUPPLIER_EXCEPTIONS, from_status="ai_processed",
                              to_status="approved", reason="signed off (bench)")
    return op.execute(context(run_id, "approve_items"))


def publish(run_id: str) -> dict:
    from conveyor import PublishOperator
    from conveyor_examples.supplier_exceptions import SUPPLIER_EXCEPTIONS

    op = PublishOperator(
        task_id="publish_report",
        workflow=SUPPLIER_EXCEPTIONS,
        templates=["conveyor_examples/supplier_report.md.j2"],
        title="Supplier exceptions (bench)",
        required_fields=["ai_result.draft"],
    )
    result = op.execute(context(run_id, "publish_report"))
    return {"items": result["items"], "moved": result["moved_now"]}


STEPS = {"gate": gate, "review_inputs": review, "ai": ai, "review_drafts": review, "promote": promote,
         "publish": publish}  # fmt: skip


def child(step: str, run_id: str, path: str | None) -> None:
    """One step in a process of its own: its time and its peak RSS."""
    import great_expectations  # noqa: F401  (imports are start-up, not the task's time)
    import sklearn  # noqa: F401

    from conveyor import PromoteItemsOperator, PublishOperator  # noqa: F401  (Airflow's import: start-up)
    from conveyor.ledger import Ledger
    from conveyor.review.review_queue import ReviewQueue  # noqa: F401

    Ledger().workflow(WF)
    started = time.perf_counter()
    if step == "gate":
        result = gate(Path(path or ""), run_id)
    elif step == "review_inputs":
        result = review(run_id, "quarantined", "approve")
    elif step == "review_drafts":
        result = review(run_id, "pending_review", "approve")
    else:
        result = STEPS[step](run_id)
    result.update(seconds=time.perf_counter() - started, peak_mb=peak_mb())
    print("RESULT " + json.dumps(result))


def run_child(step: str, run_id: str, path: Path | None = None) -> dict:
    command = [sys.executable, __file__, "--step", step, "--run-id", run_id]
    if path:
        command += ["--file", str(path)]
    out = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"{step} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


# -- one task instance per item ---------------------------------------------------------------------


def per_item(path: Path, count: int, folder: Path) -> tuple[float, int]:
    """Every step once per item, each with its own setup; returns (seconds, items published)."""
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = [row for _, row in zip(range(count), reader, strict=False)]
        fields = reader.fieldnames or []
    files = []
    for n, row in enumerate(rows):
        one = folder / f"item_{n}.csv"
        with one.open("w", encoding="utf-8", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
            writer.writeheader()
            writer.writerow(row)
        files.append(one)
    from conveyor.gate.errors import BatchRejected
    from conveyor.ledger import Ledger

    ledger = Ledger()
    published = 0
    rejected: Counter[str] = Counter()
    started = time.perf_counter()
    for n, one in enumerate(files):
        run_id = f"mapped-{n}"
        try:
            gate(one, run_id, batch_checks=False)
        except BatchRejected as exc:
            rejected[exc.kind if hasattr(exc, "kind") else type(exc).__name__] += 1
            if len(rejected) == 1 and sum(rejected.values()) == 1:
                print(f"  (per item: first rejection: {exc})")
            continue  # a bad row: quarantined, never reaches the model
        review(run_id, "quarantined", "approve")
        if ledger.item_ids(workflow=WF, run_id=run_id, status="validated"):
            ai(run_id)
            review(run_id, "pending_review", "approve")
        if ledger.item_ids(workflow=WF, run_id=run_id, status="ai_processed"):
            promote(run_id)
            published += publish(run_id)["items"]
    return time.perf_counter() - started, published


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--mapped-items", type=int, default=1000)
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--run-id", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        child(args.step, args.run_id, args.file)
        return
    import tempfile

    from _pg import drop, scratch_database
    from gate import make_extract

    from conveyor.ledger import Ledger
    from conveyor_examples.supplier_exceptions import SUPPLIER_EXCEPTIONS

    path, _ = make_extract(args.items)
    name = f"conveyor_bench_e2e_{os.getpid()}"
    dsn = scratch_database(name)
    os.environ["AIRFLOW_CONN_CONVEYOR_LEDGER"] = dsn
    os.environ["AIRFLOW__CONVEYOR__STORAGE_BASE"] = Path(tempfile.mkdtemp(prefix="conveyor-e2e-")).as_uri()
    try:
        ledger = Ledger(dsn)
        ledger.upgrade()
        ledger.declare(SUPPLIER_EXCEPTIONS, actor="bench")
        run_id = "e2e"
        results = {}
        for step in STEPS:
            results[step] = run_child(step, run_id, path if step == "gate" else None)
            r = results[step]
            shown = {k: v for k, v in r.items() if k not in ("seconds", "peak_mb")}
            print(f"{step:<14} {r['seconds']:7.2f} s   peak {r['peak_mb']:6.0f} MB   {shown}", flush=True)
        counts = ledger.count_by_status(workflow=WF, run_id=run_id)
        own = sum(results[s]["seconds"] for s in ("gate", "ai", "promote", "publish"))
        people = results["review_inputs"]["seconds"] + results["review_drafts"]["seconds"]
        published = counts.get("published", 0)
        rate = published / own
        peak = max(r["peak_mb"] for r in results.values())
        print(f"ledger at the end: {counts}")
        print(f"tasks' own time {own:.1f} s for {published:,} items published = {rate:,.0f} items/s; "
              f"scripted reviewer {people:.1f} s for "
              f"{results['review_inputs']['decided'] + results['review_drafts']['decided']:,} decisions in 2 bulk "
              "calls "
              f"(reported apart)")  # fmt: skip
        print(f"RATIO e2e_items_per_s/10k = {rate / 10_000:.2f}  (goal >= 1)")
        print(f"RATIO peak_rss_per_task/1.5GB = {peak / 1536:.2f}  (goal <= 1; max {peak:.0f} MB)")
        if args.mapped_items:  # a ledger of its own: the same rows are new there
            os.environ["AIRFLOW_CONN_CONVEYOR_LEDGER"] = scratch_database(f"{name}_mapped")
            Ledger().upgrade()
            Ledger().declare(SUPPLIER_EXCEPTIONS, actor="bench")
            with tempfile.TemporaryDirectory() as folder:
                seconds, done = per_item(path, args.mapped_items, Path(folder))
            mapped_rate = done / seconds
            print(f"one task instance per item, {args.mapped_items:,} items: {seconds:.1f} s, {done:,} published "
                  f"= {mapped_rate:,.1f} items/s (in-process: without Airflow's own cost per task instance)")
            print(f"RATIO e2e/mapped_per_item = {rate / max(mapped_rate, 1e-9):.0f}  (goal >= 100)")
    finally:
        drop(name)
        drop(f"{name}_mapped")


if __name__ == "__main__":
    main()
