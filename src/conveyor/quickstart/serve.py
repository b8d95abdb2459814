"""The quickstart's Airflow UI, on the quickstart's own databases: ``conveyor ui``.

The quickstart runs its workflows with ``dag.test()`` and stops its API server when it ends; this
module keeps what a person needs to look afterwards:

* :func:`logins` — the UI's users and passwords, made once and kept in ``$CONVEYOR_HOME/logins.json``
  (the same on every run, so a browser's saved login keeps working);
* :func:`configure` — ``$CONVEYOR_HOME/airflow/airflow.cfg`` pointing at the quickstart's real
  metadata DB (not Airflow's default SQLite file), its DAGs, JWT secret and users, so any
  ``airflow`` command with that ``AIRFLOW_HOME`` sees the quickstart's runs;
* :func:`serve` — starts the embedded PostgreSQL when it is not running, then an
  ``airflow api-server`` on that configuration, prints the URL and the logins, and runs until
  interrupted.

``python -m conveyor.quickstart.serve configure`` is what ``./scripts/quickstart`` calls before it
migrates the metadata DB.
"""

from __future__ import annotations

import configparser
import json
import os
import secrets
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

#: The UI's users: name -> Airflow simple-auth role.
ROLES: Mapping[str, str] = {"director": "admin", "reviewer": "user"}
DEFAULT_PORT = 8080


def logins(home: Path) -> dict[str, tuple[str, str]]:
    """user -> (role, password), created once in ``home/logins.json`` (mode 0600) and reused."""
    path = home / "logins.json"
    saved: dict[str, str] = {}
    if path.exists():
        saved = {name: str(entry["password"]) for name, entry in json.loads(path.read_text()).items()}
    users = {name: (role, saved.get(name) or secrets.token_urlsafe(12)) for name, role in ROLES.items()}
    if {name: password for name, (_, password) in users.items()} != saved:
        home.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(json.dumps({n: {"role": r, "password": p} for n, (r, p) in users.items()}, indent=2) + "\n")
    return users


def airflow_home(home: Path) -> Path:
    """The quickstart's ``AIRFLOW_HOME``: ``$AIRFLOW_HOME`` when set, else ``home/airflow``."""
    return Path(os.environ.get("AIRFLOW_HOME") or home / "airflow")


def configure(home: Path, *, repo: Path | None, sql_alchemy_conn: str) -> Path:
    """Write the quickstart's settings into ``airflow.cfg`` (other keys of the file are kept).

    :param home: the Conveyor home (``.conveyor``).
    :param repo: the checkout (its ``dags/`` and ``plugins/``); None keeps the folders written before.
    :param sql_alchemy_conn: the metadata DB the quickstart runs on.
    :return: the file written.
    """
    folder = airflow_home(home)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "airflow.cfg"
    # Raw values: a socket folder in the URL is %-encoded, which Airflow's parser reads as
    # interpolation unless doubled.
    cfg = configparser.ConfigParser(interpolation=None)
    if path.exists():
        cfg.read(path)
    jwt_file = home / "jwt_secret"
    if not jwt_file.exists():
        jwt_file.write_text(secrets.token_hex(32) + "\n")
    users = logins(home)
    folders = {"dags_folder": str(repo / "dags"), "plugins_folder": str(repo / "plugins")} if repo else {}
    settings = {
        "core": {
            **folders,
            "load_examples": "False",
            "simple_auth_manager_users": ",".join(f"{name}:{role}" for name, (role, _) in users.items()),
            "simple_auth_manager_passwords_file": str(passwords_file(home)),
        },
        "database": {"sql_alchemy_conn": sql_alchemy_conn.replace("%", "%%")},
        # The review steps wait in the triggerer, as in the deployment files.
        "operators": {"default_deferrable": "True"},
        "api_auth": {"jwt_secret": jwt_file.read_text().strip()},
    }
    for section, values in settings.items():
        if not cfg.has_section(section):
            cfg.add_section(section)
        for key, value in values.items():
            cfg.set(section, key, value)
    passwords_file(home).parent.mkdir(parents=True, exist_ok=True)
    passwords_file(home).write_text(json.dumps({name: password for name, (_, password) in users.items()}))
    with path.open("w") as out:
        out.write("# The quickstart's Airflow settings: ./scripts/quickstart and `conveyor ui` rewrite their keys.\n")
        cfg.write(out)
    path.chmod(0o600)  # it holds the JWT secret and the metadata DB's URL
    return path


def passwords_file(home: Path) -> Path:
    return home / "ui" / "simple_auth_passwords.json"


def describe_logins(url: str, users: Mapping[str, tuple[str, str]], home: Path) -> str:
    lines = [f"Airflow UI: {url}  (logins kept in {home / 'logins.json'})"]
    for name, (role, password) in users.items():
        lines.append(f"  {name:<9} {password}   ({'admin: signs off reports' if role == 'admin' else 'reviews items'})")
    return "\n".join(lines)


def serve(home: Path, *, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> int:
    """Start the UI on the quickstart's databases and wait until interrupted; returns the exit code."""
    from conveyor.quickstart.api_server import ApiServerProcess

    if (home / "pgdata").exists() and not os.environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"):
        import warnings

        from conveyor.quickstart import embedded_db

        with warnings.catch_warnings():  # platformdirs' note about XDG_RUNTIME_DIR is no news to a user
            warnings.simplefilter("ignore")
            socket_dir = embedded_db.start(home)
        embedded_db.ensure_databases(socket_dir)
        sql_alchemy_conn = embedded_db.environment(socket_dir)["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        configure(home, repo=None, sql_alchemy_conn=sql_alchemy_conn)
    elif not (airflow_home(home) / "airflow.cfg").exists():
        print(f"conveyor: no quickstart found in {home}: run ./scripts/quickstart first", file=sys.stderr)
        return 4
    os.environ["AIRFLOW_HOME"] = str(airflow_home(home))
    os.environ["CONVEYOR_HOME"] = str(home)
    users = logins(home)
    process = ApiServerProcess(home / "ui", users, port=port)
    print(f"==> starting the Airflow API server on {process.server.url} (log: {process.server.log_path})", flush=True)
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server = process.wait_ready()
        print(describe_logins(server.url, users, home), flush=True)
        print("Ctrl-C stops it.", flush=True)
        process.process.wait()
        return 0 if stopping else 1
    except KeyboardInterrupt:
        return 0
    finally:
        process.stop()


def main(argv: list[str] | None = None) -> int:
    import argparse

    from conveyor.ledger.connection import conveyor_home

    parser = argparse.ArgumentParser(description="The quickstart's Airflow settings and UI.")
    parser.add_argument("action", choices=["configure", "logins"])
    parser.add_argument("--repo", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    home = conveyor_home()
    if args.action == "configure":
        conn = os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        path = configure(home, repo=args.repo.resolve(), sql_alchemy_conn=conn)
        print(f"==> Airflow settings in {path}")
    else:
        print(describe_logins(f"http://127.0.0.1:{DEFAULT_PORT}", logins(home), home))
    return 0


if __name__ == "__main__":
    sys.exit(main())
