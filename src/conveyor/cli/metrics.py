"""``conveyor metrics``: throughput, exception rate, cycle time by stage, queue age and run progress.

The same numbers the ``workflow_health`` DAG alerts on, read straight from the ledger; Airflow is
never imported on this path.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conveyor.cli.output import positive_int, print_json, print_table

if TYPE_CHECKING:
    from conveyor.ledger.deliveries import Delivery
    from conveyor.monitoring.snapshot import HealthSnapshot


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    metrics = subparsers.add_parser(
        "metrics", help="health of each workflow: throughput, exceptions, cycle, queue"
    )
    metrics.add_argument(
        "--workflow", "-w", metavar="W", help="only this workflow (default: every active one)"
    )
    metrics.add_argument(
        "--window-hours", type=_positive_float, default=24, help="measured window (default 24)"
    )
    metrics.add_argument(
        "--baseline-days", type=positive_int, default=7, help="earlier days compared (default 7)"
    )
    metrics.add_argument("--as-of", metavar="TIME", help="ISO time the window ends at (default: now)")
    metrics.add_argument(
        "--runs", type=positive_int, default=5, help="recent runs to show progress for (default 5)"
    )
    metrics.add_argument("--run", "-r", metavar="R", dest="run_id", help="progress of this run only")
    metrics.add_argument("--json", action="store_true", help="print JSON")
    metrics.set_defaults(func=run_metrics)


def _positive_float(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError("must be a positive number")
    return number



@dataclass(frozen=True)
class WorkflowReport:
    """One workflow's part of the command's output.

    :param runs: progress of its recent runs (or of ``--run``).
    :param refused_batches: with ``--run``: the batches its gate refused (they wrote no items).
    """

    health: HealthSnapshot
    runs: list[dict[str, Any]]
    refused_batches: list[Delivery] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        data = {**self.health.as_xcom(), "runs": self.runs}
        if self.refused_batches:
            data["refused_batches"] = self.refused_batches
        return data


def collect(args: argparse.Namespace) -> tuple[str, list[WorkflowReport], list[dict[str, Any]]]:
    """Every number the command prints: the moment measured, each workflow's report, the open alerts."""
    from datetime import timedelta

    from conveyor.ledger.store import Ledger
    from conveyor.monitoring import metrics
    from conveyor.monitoring.store import MonitoringStore

    ledger = Ledger(args.dsn)
    as_of = metrics.utc(args.as_of)
    if args.workflow:
        ledger.workflow(args.workflow)  # an undeclared or malformed name: a clear error
        workflows = [args.workflow]
    else:
        span = timedelta(hours=args.window_hours) + timedelta(days=args.baseline_days)
        declared = set(ledger.workflow_names())
        workflows = [w for w in metrics.active_workflows(ledger, since=as_of - span) if w in declared]
    out = []
    for workflow in workflows:
        health = metrics.measure(
            ledger, workflow, as_of=as_of, window_hours=args.window_hours, baseline_days=args.baseline_days
        )
        runs = metrics.run_progress(ledger, workflow, run_id=args.run_id, as_of=as_of, limit=args.runs)
        # A batch the gate refused wrote no items, so the run has no progress line: say why.
        refused = (
            [d for d in ledger.deliveries(workflow, run_id=args.run_id) if d.outcome != "accepted"]
            if args.run_id else []
        )
        out.append(WorkflowReport(health, runs, refused))
    return as_of.isoformat(), out, MonitoringStore(ledger).open_alerts(args.workflow)


def run_metrics(args: argparse.Namespace) -> int:
    from conveyor.monitoring.alerts import fmt_count, fmt_duration, fmt_share

    as_of, reports, alerts = collect(args)
    if args.json:
        print_json({"as_of": as_of, "workflows": [r.as_json() for r in reports], "open_alerts": alerts})
        return 0
    if not reports:
        print("no workflow has activity in the measured period")
        return 0
    for report in reports:
        health = report.health
        tp, ex, q, cyc = health.throughput, health.exceptions, health.queue, health.cycle
        print(f"{health.workflow}  (last {health.window} to {health.when})")
        change = f" ({tp.change:+.0%})" if tp.change is not None else ""
        print(f"  throughput     {tp.current} completed, usual {fmt_count(tp.baseline)}{change}")
        print(
            f"  exceptions     {fmt_share(ex.rate)} ({ex.exceptions} of {ex.received} received),"
            f" usual {fmt_share(ex.baseline_rate)}"
        )
        if ex.approvals:
            print(f"  approvals      {ex.approvals} routed to a person by a business rule (not exceptions)")
        top = [s for s in ex.sources if s.exceptions][:3]
        if top and ex.source_field:
            listed = ", ".join(f"{s.source} {s.exceptions}" for s in top)
            print(f"  top sources    by {ex.source_field}: {listed}")
        now, before = cyc.current, cyc.baseline
        print(
            f"  cycle time     p50 {fmt_duration(now.total.p50)},"
            f" p95 {fmt_duration(now.total.p95)}"
            f" over {now.items} items (usual p95 {fmt_duration(before.total.p95)})"
        )
        print(
            f"  review queue   {q.size} waiting, oldest {fmt_duration(q.oldest_age_s)},"
            f" {q.over_bound} over {fmt_duration(q.bound_s)}"
        )
        print_table(
            [
                (stage, fmt_duration(s.p50), fmt_duration(s.p95), fmt_duration(before.stages[stage].p95))
                for stage, s in now.stages.items()
            ],
            ["stage", "p50", "p95", "usual p95"],
        )
        if report.runs:
            print_table(
                [
                    (
                        r["run_id"],
                        f"{r['done']} of {r['received']}",
                        fmt_share(r["progress"]),
                        r["in_review"],
                        r["stopped"],
                    )
                    for r in report.runs
                ],
                ["run", "done", "progress", "in review", "stopped"],
            )
        for batch in report.refused_batches:
            print(f"  input {batch.outcome:<9} at step {batch.step} of run {batch.run_id}: {batch.reason}"
                  f" (conveyor batches --workflow {batch.workflow} --run '{batch.run_id}')")  # fmt: skip
        print()
    if alerts:
        print("open alerts:")
        for alert in alerts:
            print(f"  {alert['severity']:<8} {alert['title']} (since {alert['opened_at']:%Y-%m-%d %H:%M})")
    return 0
