"""``conveyor queue`` and ``conveyor review``: the review queue and reviewers' decisions.

Exit codes of ``review``: 0 decided, 3 unknown item, 5 conflict (someone decided first, or the
item is not awaiting review; in bulk also an item an approval would let past its step's
contract), 1 any other refusal (a single approval refused prints the field and what it needs).
No Airflow import on any path.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from conveyor.cli.output import print_json, print_table

if TYPE_CHECKING:
    from conveyor.ledger.records import Item

EXIT_CONFLICT = 5


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    queue = subparsers.add_parser(
        "queue", help="items waiting for a person, highest priority and oldest first"
    )
    queue.add_argument("--workflow", "-w", metavar="W")
    queue.add_argument("--run", "-r", metavar="R", dest="run_id")
    queue.add_argument("--status", "-s", choices=["quarantined", "pending_review"])
    queue.add_argument("--limit", type=_positive, default=100, help="at most this many rows (default 100)")
    queue.add_argument("--offset", type=int, default=0, help="skip this many rows")
    queue.add_argument("--json", action="store_true", help="print JSON")
    queue.set_defaults(func=run_queue)

    review = subparsers.add_parser(
        "review",
        help="decide on items awaiting review: ITEM... or every item of --workflow [--run] --all",
    )
    review.add_argument("items", metavar="ITEM", nargs="*", help="item ids: <workflow>:<business key>")
    review.add_argument("--workflow", "-w", metavar="W", help="with --all: items of this workflow")
    review.add_argument("--run", "-r", metavar="R", dest="run_id", help="with --all: items of this run")
    review.add_argument("--status", "-s", choices=["quarantined", "pending_review"], help="with --all")
    review.add_argument(
        "--all", action="store_true", help="decide every item on the queue matching --workflow/--run/--status"
    )
    action = review.add_mutually_exclusive_group(required=True)
    action.add_argument("--approve", dest="action", action="store_const", const="approve")
    action.add_argument("--reject", dest="action", action="store_const", const="reject")
    action.add_argument(
        "--correct",
        dest="corrected",
        metavar="JSON",
        help="correct the item: the corrected fields (a JSON object), merged into a quarantined item's input "
        "(validated again by its run) or into a pending item's AI answer (checked, then approved onward)",
    )
    action.add_argument("--retry-ai", dest="action", action="store_const", const="retry_ai",
                        help="send an item the AI step gave no usable answer back to the AI step")
    action.add_argument("--retry-effect", dest="action", action="store_const", const="retry_effect",
                        help="send an item whose effect was refused back to the effect step")
    action.add_argument("--undo", dest="action", action="store_const", const="undo",
                        help="take back your own latest decision on an item that has not moved on")
    action.add_argument("--done-elsewhere", dest="reference", metavar="REFERENCE",
                        help="record an item's refused effect as done elsewhere (e.g. a payment id)")
    review.add_argument("--by", required=True, metavar="NAME", help="who decides (recorded in the history)")
    review.add_argument("--comment", metavar="TEXT", help="why (recorded in the history)")
    review.add_argument("--json", action="store_true", help="print JSON")
    review.set_defaults(func=run_review)


def _positive(value: str) -> int:
    number = int(value)
    if number <= 0 or number > 500:
        raise argparse.ArgumentTypeError("must be between 1 and 500")
    return number


def _age(seconds: float) -> str:
    s = int(seconds)
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m"
    return f"{s}s"


def run_queue(args: argparse.Namespace) -> int:
    from conveyor.ledger.store import Ledger
    from conveyor.review.review_queue import ReviewQueue

    queue = ReviewQueue(Ledger(args.dsn))
    page = queue.list(
        workflows=[args.workflow] if args.workflow else None,
        run_id=args.run_id,
        status=args.status,
        limit=args.limit,
        offset=args.offset,
    )
    if args.json:
        print_json(
            {
                "total": page.total,
                "limit": page.limit,
                "offset": page.offset,
                "items": [
                    {
                        **_plain_item(e.item),
                        "waiting_since": e.waiting_since,
                        "age_seconds": round(e.age_seconds, 3),
                    }
                    for e in page.entries
                ],
            }
        )
        return 0
    if not page.entries:
        print("nothing waits for a person" + (f" in {args.workflow}" if args.workflow else ""))
        return 0
    print_table(
        [
            (
                e.item.item_id,
                e.item.status,
                e.item.priority,
                _age(e.age_seconds),
                e.item.confidence,
                e.item.run_id,
                e.item.reason,
            )
            for e in page.entries
        ],
        ["item", "status", "priority", "waiting", "confidence", "run", "reason"],
    )
    shown = page.offset + len(page.entries)
    if shown < page.total or page.offset:
        print(f"({page.offset + 1}-{shown} of {page.total})")
    return 0


def _plain_item(item: Item) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(item)


def run_review(args: argparse.Namespace) -> int:
    from conveyor.ledger.store import Ledger
    from conveyor.review.errors import DecisionConflict, InvalidDecision, NotAwaitingReview
    from conveyor.review.review_queue import ReviewQueue

    payload = None
    action = args.action
    if args.reference is not None:
        action = "done_elsewhere"
    if action in ("retry_ai", "retry_effect", "done_elsewhere", "undo") and (args.all or len(args.items) != 1):
        print(f"conveyor: {action.replace('_', '-')} takes exactly one item", file=sys.stderr)
        return 2
    if args.all or len(args.items) != 1:
        return _run_bulk(args)
    if args.workflow or args.run_id or args.status:
        print("conveyor: --workflow/--run/--status select items with --all only", file=sys.stderr)
        return 2
    if args.corrected is not None:
        action = "correct"
        try:
            payload = json.loads(args.corrected)
        except json.JSONDecodeError as exc:
            print(f"conveyor: --correct needs a JSON object: {exc}", file=sys.stderr)
            return 2
    queue = ReviewQueue(Ledger(args.dsn))
    try:
        result = queue.decide(
            args.items[0], action, reviewer=args.by, comment=args.comment, changes=payload, reference=args.reference
        )
    except NotAwaitingReview as exc:  # DecisionConflict included
        if args.json:
            detail: dict[str, Any] = {
                "error": "already_decided" if isinstance(exc, DecisionConflict) else "not_awaiting_review",
                "message": str(exc),
                "status": exc.status,
            }
            if isinstance(exc, DecisionConflict):
                detail.update(decided_by=exc.decided_by, decided_at=exc.decided_at)
            print_json(detail)
        print(f"conveyor: {exc}", file=sys.stderr)
        return EXIT_CONFLICT
    except InvalidDecision as exc:
        print(f"conveyor: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print_json(result)
    else:
        print(
            f"{result.item_id}: {result.from_status} -> {result.to_status} "
            f"({result.action.value} by {result.actor})"
        )
    return 0


def _run_bulk(args: argparse.Namespace) -> int:
    """Many items (ids, or ``--all`` of a filter), one decision each; exit 5 when any was refused."""
    from conveyor.ledger.store import Ledger
    from conveyor.review.bulk import QueueFilter
    from conveyor.review.errors import InvalidDecision
    from conveyor.review.review_queue import ReviewQueue

    if args.corrected is not None:
        print("conveyor: --correct takes exactly one item", file=sys.stderr)
        return 2
    if args.all == bool(args.items):
        print("conveyor: give item ids, or --all with --workflow (and --run)", file=sys.stderr)
        return 2
    if args.all and not args.workflow:
        print("conveyor: --all needs --workflow W (and optionally --run R)", file=sys.stderr)
        return 2
    queue = ReviewQueue(Ledger(args.dsn))
    where = QueueFilter([args.workflow], run_id=args.run_id, status=args.status) if args.all else None
    try:
        outcome = queue.decide_many(
            None if args.all else args.items, args.action, reviewer=args.by, comment=args.comment, where=where
        )
    except InvalidDecision as exc:
        print(f"conveyor: {exc}", file=sys.stderr)
        return 1
    refused = [*outcome.already_decided, *outcome.not_awaiting_review, *outcome.blocked]
    if args.json:
        print_json(outcome.as_json())
    else:
        for d in outcome.decided:
            print(f"{d.item_id}: {d.from_status} -> {d.to_status} ({outcome.action} by {outcome.actor})")
        for r in outcome.already_decided:
            print(f"{r.item_id}: not applied, already decided by {r.decided_by} (it is {r.status})")
        for r in outcome.not_awaiting_review:
            print(f"{r.item_id}: not applied, not awaiting review (it is {r.status})")
        for item_id in outcome.unknown:
            print(f"{item_id}: no such item")
        for item_id, blockers in sorted(outcome.blocked.items()):
            print(f"{item_id}: not applied, cannot be approved as it is: " + "; ".join(b.need for b in blockers))
        print(f"{len(outcome.decided)} decided, {len(refused)} refused, {len(outcome.unknown)} unknown")
    if outcome.unknown and not outcome.decided and not refused:
        return 3
    return EXIT_CONFLICT if refused or outcome.unknown else 0
