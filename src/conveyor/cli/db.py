"""``conveyor db upgrade``: apply the ledger's schema migrations (safe on every start)."""

from __future__ import annotations

import argparse

from conveyor.cli.output import print_json


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    db = subparsers.add_parser("db", help="manage the ledger database")
    actions = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    upgrade = actions.add_parser("upgrade", help="apply pending schema migrations")
    upgrade.add_argument("--json", action="store_true", help="print JSON")
    upgrade.set_defaults(func=run_upgrade)


def run_upgrade(args: argparse.Namespace) -> int:
    from conveyor.ledger import Ledger

    ledger = Ledger(args.dsn)
    applied = ledger.upgrade()
    version = ledger.schema_version()
    if args.json:
        print_json({"applied": applied, "schema_version": version})
    elif applied:
        print(f"applied {len(applied)} migration(s): {', '.join(applied)}; schema version {version}")
    else:
        print(f"ledger schema is up to date (version {version})")
    return 0
