"""``conveyor lint [PATH]``: fail any DAG task that declares no recovery strategy."""

from __future__ import annotations

import argparse

from conveyor.cli.output import print_json


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lint = subparsers.add_parser("lint", help="check that every DAG task declares its recovery strategy")
    lint.add_argument("path", nargs="?", default="dags", metavar="PATH", help="DAG folder or file (default: dags)")
    lint.add_argument("--json", action="store_true", help="print JSON")
    lint.set_defaults(func=run_lint)


def run_lint(args: argparse.Namespace) -> int:
    from conveyor.lint import lint_dags

    checked, findings = lint_dags(args.path)
    if args.json:
        print_json({"tasks_checked": checked, "findings": [vars(f) for f in findings]})
    else:
        for finding in findings:
            print(finding)
        print(f"{checked} task(s) checked, {len(findings)} problem(s)")
    return 1 if findings or checked == 0 else 0
