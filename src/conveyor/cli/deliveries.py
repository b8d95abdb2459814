"""``conveyor batches`` and ``conveyor outbox``: what came in through the gates, what went out once.

A rejected batch has no items, so ``conveyor items`` cannot show it: ``batches`` lists every
input a gate saw with its reason. ``outbox`` lists the publications and side effects (payments)
done once, with where they went. No Airflow import.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from conveyor.cli.output import positive_int, print_json, print_table

if TYPE_CHECKING:
    from conveyor.ledger.deliveries import Delivery


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    batches = subparsers.add_parser(
        "batches", help="every input a gate saw (accepted, rejected, repeated, empty), with its reason"
    )
    outbox = subparsers.add_parser("outbox", help="what was published or applied once, and where")
    for parser, func, default in ((batches, run_batches, 50), (outbox, run_outbox, 100)):
        parser.add_argument("--workflow", "-w", metavar="W", required=True)
        parser.add_argument("--run", "-r", metavar="R", dest="run_id")
        parser.add_argument(
            "--limit", type=positive_int, default=default, help=f"at most this many rows (default {default})"
        )
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(func=func)



def run_batches(args: argparse.Namespace) -> int:
    from conveyor.ledger import Ledger

    found = Ledger(args.dsn).deliveries(args.workflow, run_id=args.run_id, limit=args.limit)
    if args.json:
        print_json(found)
        return 0
    if not found:
        print(f"no batch of {args.workflow}" + (f" in run {args.run_id}" if args.run_id else "") + " reached a gate")
        return 0
    print_table(
        [(d.at, d.run_id, d.step, d.outcome, _rows(d), d.source, d.reason) for d in found],
        ["at", "run", "step", "outcome", "rows", "source", "reason"],
    )
    return 0


def _rows(delivery: Delivery) -> str:
    if delivery.rows is None:
        return "-"
    if delivery.quarantined:
        return f"{delivery.rows} ({delivery.quarantined} to a person)"
    return str(delivery.rows)


def run_outbox(args: argparse.Namespace) -> int:
    from conveyor.ledger import Ledger

    found = Ledger(args.dsn).outbox(args.workflow, run_id=args.run_id, limit=args.limit)
    if args.json:
        print_json(found)
        return 0
    if not found:
        print(f"nothing of {args.workflow}" + (f" in run {args.run_id}" if args.run_id else "")
              + " was published or applied")  # fmt: skip
        return 0
    print_table(
        [(e.completed_at or e.claimed_at, e.run_id, e.effect, e.key, e.state, e.items, e.where) for e in found],
        ["at", "run", "effect", "key", "state", "items", "where"],
    )
    begun = [e for e in found if e.state != "done"]
    if begun:
        print(f"{len(begun)} effect(s) claimed and not recorded done (refused, under way, or interrupted: "
              "`conveyor status KEY` says which); a clear of their step skips what is done and retries the "
              "rest with the same idempotency keys")  # fmt: skip
    return 0
