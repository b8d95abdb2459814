"""``conveyor accuracy``: how often what passed an AI step unreviewed was wrong, and the threshold curve.

Estimated from the spot checks and decisions recorded in the ledger (see
:mod:`conveyor.monitoring.accuracy`); Airflow is never imported on this path. It recommends a
``min_confidence``; a person changes the step's threshold.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from conveyor.cli.output import print_json, print_table

EXIT_NOT_FOUND = 3


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "accuracy", help="error rate of what AI steps passed unreviewed, from spot checks; the threshold curve"
    )
    parser.add_argument("--workflow", "-w", metavar="W", required=True, help="the workflow")
    parser.add_argument("--step", "-s", metavar="S", help="only this AI step (its task id)")
    parser.add_argument("--days", type=_positive_float, default=7, help="the period, ending now (default 7)")
    parser.add_argument("--as-of", metavar="TIME", help="ISO time the period ends at (default: now)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run_accuracy)


def _positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of days, got {value!r}") from None
    if not 0 < number <= 3650:
        raise argparse.ArgumentTypeError("must be a number of days above 0 (at most 3650)")
    return number


def collect(args: argparse.Namespace) -> dict[str, Any]:
    """Every number the command prints, as one JSON-ready dict."""
    from conveyor.ledger.store import Ledger
    from conveyor.monitoring.accuracy_reads import accuracy_report

    ledger = Ledger(args.dsn)
    ledger.workflow(args.workflow)  # an undeclared name: exit 3 with the closest names
    return accuracy_report(ledger, args.workflow, step=args.step, days=args.days, as_of=args.as_of)


def _share(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}%}"


def run_accuracy(args: argparse.Namespace) -> int:
    from conveyor.monitoring.accuracy_reads import UnknownStep

    try:
        data = collect(args)
    except UnknownStep as exc:
        print(f"conveyor: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if args.json:
        print_json(data)
        return 0
    if not data["steps"]:
        print(f"no AI step of {args.workflow} has recorded answers yet")
        return 0
    for s in data["steps"]:
        print(f"{s['workflow']} / {s['step']}  ({args.days:g} days to {data['as_of']})")
        target = _share(s["max_error_rate"]) if s["max_error_rate"] is not None else "none declared"
        print(
            f"  passed unreviewed  {s['passed']} answers; error {_share(s['passed_error_rate'])}"
            f" (95% upper bound {_share(s['passed_error_upper'])}) from {s['spot_checked']} decided spot checks"
            f" ({s['spot_wrong']} wrong); target {target}"
        )
        print(f"  exceptions         {_share(s['exception_rate'])} ({s['exceptions']} of {s['answers']} answers)")
        print(
            f"  reviewed           {s['reviewed']} doubtful answers decided, {_share(s['reviewed_error_rate'])} wrong;"
            f" {s['bad_input']} rejected as bad input"
        )
        prev = s["previous"]
        print(
            f"  previous period    error {_share(prev['passed_error_rate'])}"
            f" (upper {_share(prev['passed_error_upper'])}) from {prev['spot_checked']} spot checks"
        )
        if s["recommended_min_confidence"] is not None:
            print(
                f"  recommended        min_confidence={s['recommended_min_confidence']:.2f}"
                f" (sends {_share(s['recommended_review_share'])} to review; now {s['min_confidence']})"
            )
        elif s["max_error_rate"] is not None:
            print("  recommended        none: no threshold's upper bound is under the target yet (more spot checks"
                  " narrow it: raise spot_check or wait)")  # fmt: skip
        print_table(
            [
                (f"{p['min_confidence']:.2f}", _share(p["review_share"]), _share(p["passed_error"]),
                 _share(p["passed_error_upper"]), f"{p['sample']:g}")
                for p in s["curve"]
            ],
            ["min_confidence", "to review", "error passed", "upper 95%", "sample"],
        )  # fmt: skip
    return 0
