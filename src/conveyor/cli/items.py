"""``conveyor status|history|items``: where an item is, how it got there, what a run holds."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from conveyor.cli.output import positive_int, print_json, print_table
from conveyor.ledger.statuses import as_statuses

if TYPE_CHECKING:
    from conveyor.ledger.store import Ledger


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = subparsers.add_parser("status", help="where an item is right now")
    status.add_argument(
        "item", metavar="ITEM", help="item id: <workflow>:<business key> (a business key alone when it is unique)"
    )
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=run_status)

    history = subparsers.add_parser("history", help="every transition of an item")
    history.add_argument("item", metavar="ITEM", help="item id, or a business key that is unique")
    history.add_argument("--json", action="store_true", help="print JSON")
    history.set_defaults(func=run_history)

    items = subparsers.add_parser("items", help="list items, the newest received first")
    items.add_argument("--workflow", "-w", metavar="W")
    items.add_argument("--run", "-r", metavar="R", dest="run_id")
    items.add_argument("--status", "-s", metavar="S", type=_status_arg)
    items.add_argument("--limit", type=positive_int, default=100, help="at most this many rows (default 100)")
    items.add_argument("--json", action="store_true", help="print JSON")
    items.set_defaults(func=run_items)


def _status_arg(value: str) -> str:
    try:
        return as_statuses(value)[0]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None



def run_status(args: argparse.Namespace) -> int:
    from conveyor.ledger.lookup import get_item

    item = get_item(args.item, args.dsn)
    if args.json:
        print_json(item)
        return 0
    print(f"{item.item_id}: {item.status}")
    print(f"  run       {item.run_id}")
    print(f"  updated   {item.updated_at:%Y-%m-%d %H:%M:%S %Z}")
    if item.reason:
        print(f"  reason    {item.reason}")
    if item.confidence is not None:
        print(f"  confidence {item.confidence:.2f}")
    if item.last_error and item.last_error != item.reason and _stuck(item.status):
        # An error an item has since moved past (a gate failure a person corrected) is history,
        # not where the item is: `conveyor history` keeps it.
        print(f"  last error {item.last_error}")
    print(f"  attempts  {item.attempts}")
    return 0


def _stuck(status: str) -> bool:
    from conveyor.ledger.statuses import REVIEW_STATUSES, STOPPED_STATUSES, Status

    return status in REVIEW_STATUSES or status in STOPPED_STATUSES or status == Status.CORRECTED


def run_history(args: argparse.Namespace) -> int:
    from conveyor.ledger.lookup import get_history

    records = get_history(args.item, args.dsn)
    if args.json:
        print_json(records)
        return 0
    print_table(
        [(r.at, r.from_status or "(new)", r.to_status, r.actor, r.reason) for r in records],
        ["at", "from", "to", "actor", "reason"],
    )
    for r in records:  # what reviewers corrected, field by field
        detail = r.detail if isinstance(r.detail, dict) else {}
        if detail.get("changes"):
            from conveyor.review.corrections import describe_changes

            print(f"{r.at:%Y-%m-%d %H:%M:%S} {r.actor} corrected {detail.get('field', 'payload')}: "
                  f"{describe_changes(detail['changes'], limit=50)}")  # fmt: skip
            if "model_answer" in detail:
                print(f"  the model had answered: {json.dumps(detail['model_answer'], default=str)}")
    return 0


def run_items(args: argparse.Namespace) -> int:
    import sys

    if args.status and args.workflow:
        from conveyor.ledger.store import Ledger

        statuses = Ledger(args.dsn).workflow(args.workflow).statuses
        if args.status not in statuses:
            print(f"conveyor: {args.status!r} is not a status of workflow {args.workflow!r}; its statuses: "
                  f"{', '.join(sorted(statuses))}", file=sys.stderr)
            return 2
    from conveyor.ledger.lookup import get_items  # the fast read path (no psycopg 3 import)

    found = get_items(workflow=args.workflow, run_id=args.run_id, status=args.status, limit=args.limit, dsn=args.dsn)
    if args.json:
        print_json(found)
        return 0
    if not found:
        print("no items match")
        return 0
    print_table(
        [(i.item_id, i.status, i.run_id, i.created_at, i.updated_at, i.reason) for i in found],
        ["item", "status", "run", "received", "updated", "reason"],
    )
    if args.run_id:
        from conveyor.ledger.store import Ledger

        for line in run_progress(Ledger(args.dsn), args.run_id, args.workflow):
            print(line)
    return 0


def run_progress(ledger: Ledger, run_id: str, workflow: str | None) -> list[str]:
    """One line per workflow of the run: items done of items received, and where the rest are."""
    from conveyor.ledger.errors import UnknownWorkflow
    from conveyor.ledger.statuses import REVIEW_STATUSES, STOPPED_STATUSES

    per_workflow = ledger.counts_by_workflow(run_id, workflow=workflow)
    lines = []
    for name, counts in sorted(per_workflow.items()):
        try:
            done_status = ledger.workflow(name).done
        except UnknownWorkflow:
            done_status = "?"
        received, done = sum(counts.values()), counts.get(done_status, 0)
        review = sum(counts.get(s, 0) for s in REVIEW_STATUSES)
        stopped = sum(counts.get(s, 0) for s in STOPPED_STATUSES)
        lines.append(
            f"progress of run {run_id} ({name}): {done} of {received} done ({done_status}), "
            f"{review} waiting for a person, {stopped} stopped, {received - done - review - stopped} in flight"
        )
    return lines
