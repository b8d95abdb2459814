"""The stack's admin user for Airflow's ``SimpleAuthManager`` (the Airflow 3 default auth manager).

``SimpleAuthManager`` takes its users from ``[core] simple_auth_manager_users`` (``name:role``) and
their passwords from a JSON file (``[core] simple_auth_manager_passwords_file``); for a user missing
from the file it generates a random password and only prints it in the API server's log. The
``airflow-init`` service writes the admin's password there first, so the login is known:
``python -m conveyor.deploy.admin_user`` (username and password from ``_AIRFLOW_WWW_USER_USERNAME`` /
``_AIRFLOW_WWW_USER_PASSWORD``, as in Airflow's own docker-compose). An existing entry is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

PASSWORDS_FILE_ENV = "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"


def ensure_admin_user(passwords_file: str | Path, username: str, password: str) -> bool:
    """Add ``username`` with ``password`` to the passwords file unless it is already there.

    :param passwords_file: the JSON file ``SimpleAuthManager`` reads (``{"user": "password"}``).
    :param username: the admin's name (must also be in ``simple_auth_manager_users``).
    :param password: the password to set when the user is new.
    :return: True when the user was added, False when it already existed.
    :raises ValueError: the username or password is empty, or the file is not a JSON object.
    """
    if not username or not password:
        raise ValueError("the admin username and password must not be empty")
    path = Path(passwords_file)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        users = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg})") from None
    if not isinstance(users, dict):
        raise ValueError(f"{path}: expected a JSON object of user: password")
    if username in users:
        return False
    users[username] = password
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole then renamed: the API server never reads a half-written file.
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(users, indent=2) + "\n", encoding="utf-8")
    tmp.chmod(0o600)
    tmp.replace(path)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m conveyor.deploy.admin_user [--file F] [--username U] [--password P]``.

    :param argv: the arguments (default: ``sys.argv[1:]``).
    :return: 0 on success, 1 on an error.
    """
    parser = argparse.ArgumentParser(
        prog="python -m conveyor.deploy.admin_user", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--file", default=os.environ.get(PASSWORDS_FILE_ENV), help=f"default: ${PASSWORDS_FILE_ENV}"
    )
    parser.add_argument("--username", default=os.environ.get("_AIRFLOW_WWW_USER_USERNAME", "airflow"))
    parser.add_argument("--password", default=os.environ.get("_AIRFLOW_WWW_USER_PASSWORD", "airflow"))
    args = parser.parse_args(argv)
    if not args.file:
        print(f"conveyor admin user: set {PASSWORDS_FILE_ENV} or pass --file", file=sys.stderr)
        return 1
    try:
        added = ensure_admin_user(args.file, args.username, args.password)
    except (OSError, ValueError) as exc:
        print(f"conveyor admin user: {exc}", file=sys.stderr)
        return 1
    print(f"admin user {args.username!r} {'created' if added else 'already exists'} in {args.file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
