"""A local ``airflow api-server`` with simple-auth users, for the quickstart and the tests.

Airflow's sign-off step (``ApprovalOperator``) waits for an answer that arrives through the API
server, and Conveyor's review API and page are mounted in it; so the quickstart runs one on the
same metadata DB for as long as the workflows run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx


#: Below Linux's default ephemeral range (32768-60999), above the services a machine runs here
#: (PostgreSQL 5432, Redis 6379, RabbitMQ 5672/15672, Airflow 8080).
_PORTS = (20000, 32000)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, outside the ephemeral range.

    A port of ``bind(('127.0.0.1', 0))`` is an ephemeral one, the range every outgoing connection's
    local port comes from: between the probe and a server's own bind (seconds, for an Airflow
    api-server) a connection can take it, and the server exits with "address already in use" (seen
    in CI: the wheel's smoke test then waited 480 s on refused connections). A port below that
    range is never taken by a connection; drawn at random, so that processes do not all try one.
    """
    import random

    for _ in range(200):
        port = random.randrange(*_PORTS)  # noqa: S311  (a port, not a secret)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_PORTS[0]}-{_PORTS[1]} after 200 tries")


@dataclass(frozen=True)
class ApiServer:
    """A running API server: its URL and how to get a user's token."""

    url: str
    log_path: Path
    passwords: Mapping[str, str]

    def token(self, user: str) -> str:
        import httpx

        response = httpx.post(
            f"{self.url}/auth/token", json={"username": user, "password": self.passwords[user]}, timeout=30
        )
        response.raise_for_status()
        return str(response.json()["access_token"])

    def client(self, user: str | None = None) -> httpx.Client:
        """An ``httpx.Client`` on the server, authenticated as ``user`` when given."""
        import httpx

        headers = {"Authorization": f"Bearer {self.token(user)}"} if user else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


class ApiServerProcess:
    """``airflow api-server`` (one worker) as a child process: start now, wait for it later.

    Starting takes tens of seconds; a caller can start it, do other work, then :meth:`wait_ready`.

    :param home: folder for the passwords file and the server log.
    :param users: user name -> (simple-auth role, password), e.g. ``{"director": ("admin", "...")}``.
    :param port: the port (a free one when None).
    """

    def __init__(self, home: Path, users: Mapping[str, tuple[str, str]], *, port: int | None = None) -> None:
        home.mkdir(parents=True, exist_ok=True)
        passwords_file = home / "simple_auth_passwords.json"
        passwords_file.write_text(json.dumps({name: password for name, (_, password) in users.items()}))
        port = port or free_port()
        self.server = ApiServer(
            url=f"http://127.0.0.1:{port}", log_path=home / "api-server.log",
            passwords={name: password for name, (_, password) in users.items()},
        )
        env = dict(
            os.environ,
            AIRFLOW__API__BASE_URL=self.server.url,
            AIRFLOW__API__PORT=str(port),
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=",".join(f"{n}:{role}" for n, (role, _) in users.items()),
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(passwords_file),
        )
        with self.server.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [str(Path(sys.executable).with_name("airflow")), "api-server", "--host", "127.0.0.1",
                 "--port", str(port), "--workers", "1"],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def wait_ready(self, timeout: float = 180) -> ApiServer:
        """Block until the server answers its health check; raise with its log when it cannot."""
        import httpx

        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"api-server exited with {self.process.returncode}:\n{self.server.log_path.read_text()[-3000:]}"
                )
            try:
                if httpx.get(f"{self.server.url}/api/v2/monitor/health", timeout=2).status_code == 200:
                    return self.server
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"api-server did not answer in {timeout:.0f} s; see {self.server.log_path}")
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop the server and every worker it forked (it runs in a process group of its own)."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=15)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)


@contextmanager
def running_api_server(
    home: Path, users: Mapping[str, tuple[str, str]], *, port: int | None = None, startup_timeout: float = 180
) -> Iterator[ApiServer]:
    """A ready API server for the ``with`` block (see :class:`ApiServerProcess`)."""
    process = ApiServerProcess(home, users, port=port)
    try:
        yield process.wait_ready(startup_timeout)
    finally:
        process.stop()
