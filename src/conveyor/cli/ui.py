"""``conveyor ui``: the Airflow UI on the quickstart's own databases, with its logins.

Starts the embedded PostgreSQL when it is not running and an ``airflow api-server`` on the
quickstart's ``airflow.cfg`` (see :mod:`conveyor.quickstart.serve`); runs until Ctrl-C.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ui = subparsers.add_parser(
        "ui", help="the Airflow UI on the quickstart's databases (prints the URL and logins)"
    )
    ui.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default 8080)")
    ui.set_defaults(func=run_ui)


def run_ui(args: argparse.Namespace) -> int:
    from conveyor.ledger.connection import conveyor_home
    from conveyor.quickstart.serve import DEFAULT_PORT, serve

    return serve(conveyor_home(), port=args.port or DEFAULT_PORT)
