"""Entry point of the ``conveyor`` command: parses arguments and dispatches to a command module.

Each module in ``COMMAND_MODULES`` exposes ``register(subparsers)`` and sets ``func`` on its
parsers; ``func(args)`` returns the exit code. Modules are imported here, so they must keep
their own heavy imports inside ``func``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from conveyor.ledger.errors import LedgerError, LedgerUnavailable, UnknownItem, UnknownWorkflow

COMMAND_MODULES: tuple[str, ...] = (
    "conveyor.cli.items",
    "conveyor.cli.db",
    "conveyor.cli.lint",
    "conveyor.cli.review",
    "conveyor.cli.metrics",
)

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
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
