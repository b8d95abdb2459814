"""Entry point of the ``conveyor`` command: parses arguments and dispatches to a command module.

Each module in ``COMMAND_MODULES`` exposes ``register(subparsers)`` and sets ``func`` on its
parsers; ``func(args)`` returns the exit code. Modules are imported here, so they must keep
their own heavy imports inside ``func``.

What every command shares is done here, once: the ledger is found from any directory (see
:func:`conveyor.ledger.connection.locate_home`), a read command's ``--workflow`` is checked
against the ledger before the command runs (a typo exits 3 with the closest names instead of
reading as an empty answer), and every command printing a table takes ``--full``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from conveyor.ledger.errors import LedgerError, LedgerUnavailable, UnknownItem, UnknownWorkflow

COMMAND_MODULES: tuple[str, ...] = (
    "conveyor.cli.items",
    "conveyor.cli.db",
    "conveyor.cli.lint",
    "conveyor.cli.review",
    "conveyor.cli.metrics",
    "conveyor.cli.accuracy",
    "conveyor.cli.deliveries",
    "conveyor.cli.ui",
)

#: Commands that only read: an unknown ``--workflow`` is an error (exit 3) for them.
READ_COMMANDS = frozenset({"items", "queue", "metrics", "accuracy", "batches", "outbox"})

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNAVAILABLE = 4


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conveyor",
        description="Look up and act on the items of Conveyor workflows in the ledger.",
    )
    parser.add_argument("--dsn", help="ledger DSN (default: the Airflow connection conveyor_ledger)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    for command in subparsers.choices.values():
        if any("--json" in action.option_strings for action in command._actions):
            command.add_argument("--full", action="store_true", help="print whole texts (reasons are not cut)")
    return parser


def _adopt_home() -> None:
    """Use the quickstart's home found from here when none is configured, so the CLI reads the
    same ledger from any directory (its ``ledger.dsn``) as from the checkout's root."""
    from conveyor.ledger.connection import locate_home

    if os.environ.get("CONVEYOR_HOME"):
        return
    home = locate_home()
    if home is not None:
        os.environ["CONVEYOR_HOME"] = str(home)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from conveyor.cli import output

    output.FULL = bool(getattr(args, "full", False))
    try:
        _adopt_home()
        if args.command in READ_COMMANDS and getattr(args, "workflow", None):
            from conveyor.ledger.lookup import check_workflow

            check_workflow(args.workflow, args.dsn)
        return int(args.func(args) or 0)
    except (UnknownItem, UnknownWorkflow) as exc:
        print(f"conveyor: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except LedgerUnavailable as exc:
        print(f"conveyor: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except (LedgerError, ValueError) as exc:
        print(f"conveyor: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
