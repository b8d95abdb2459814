"""Create the inbox folders a deployment's settings name, so a fresh stack's first run finds them.

An inbox intake fails when its folder is missing (a renamed folder or a failed mount is not a quiet
hour), so a new deployment must create its inboxes once, before the scheduler's first run. The
folder is the value of a Variable of ``airflow_settings.yaml`` (``${NAME:-default}`` resolved as the
settings loader resolves it, so the file stays the one source of the path), taken under
``[conveyor] storage_base`` as the intake takes it. On object storage the folder is made to exist by
the intake's own marker. Idempotent: an existing inbox and its files are left alone.

``python -m conveyor.deploy.inboxes airflow_settings.yaml VARIABLE [VARIABLE ...]``
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from conveyor.deploy.settings_file import SettingsFileError, read_settings_file
from conveyor.deploy.streams import stdout_to_stderr


def prepare_inboxes(settings_path: str | Path, variables: Sequence[str]) -> list[str]:
    """Create the inbox each named Variable points at; returns one line per inbox.

    :param settings_path: the ``airflow_settings.yaml`` whose variables name the inboxes.
    :param variables: the names of the variables that hold inbox paths or URLs.
    :raises SettingsFileError: the file is malformed, or a name is not one of its variables.
    """
    from conveyor import storage
    from conveyor.intake.operators import keep_inbox, location

    settings = read_settings_file(settings_path)
    values = {variable.key: variable.value for variable in settings.variables}
    lines = []
    for name in variables:
        if name not in values:
            known = ", ".join(sorted(values)) or "none"
            raise SettingsFileError(f"{settings.path}: no variable {name!r} names an inbox (variables: {known})")
        inbox = location(values[name], f"inbox of the Variable {name}")
        if storage.is_local(inbox):
            storage.local_path(inbox).mkdir(parents=True, exist_ok=True)
        keep_inbox(inbox)
        lines.append(f"inbox ready: {inbox} (Variable {name})")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m conveyor.deploy.inboxes PATH VARIABLE...``: create the inboxes, one line each.

    :param argv: the arguments (default: ``sys.argv[1:]``).
    :return: 0 when every inbox exists, 1 when the settings file or a name is wrong (nothing created
        for the names after it).
    """
    parser = argparse.ArgumentParser(
        prog="python -m conveyor.deploy.inboxes",
        description="Create the inbox folders named by variables of an airflow_settings.yaml.",
    )
    parser.add_argument("path", type=Path, help="the settings file (Astro CLI format)")
    parser.add_argument("variables", nargs="+", metavar="VARIABLE", help="a variable whose value is an inbox")
    args = parser.parse_args(argv)
    try:
        with stdout_to_stderr():
            lines = prepare_inboxes(args.path, args.variables)
    except SettingsFileError as exc:
        print(f"conveyor inboxes: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
