"""A real, native Airflow 3 deployment for tests: CeleryExecutor, two workers, S3 on loopback.

``NativeStack`` starts, as child processes of the test (each in a process group of its own):
``moto_server`` (an S3 API), ``airflow api-server``, ``scheduler``, ``dag-processor``, ``triggerer``
and two ``airflow celery worker``; it claims a metadata DB (cloned from the migrated template), a
ledger DB and a Redis database, and loads ``airflow_settings.yaml`` with docker-compose's loader.

Each worker has its own empty working directory, ``AIRFLOW_HOME`` (so its own logs), ``CONVEYOR_HOME``,
log server port and hostname, and serves the default queue plus one named after it: the workers
share no disk, so whatever one task leaves for another goes through object storage.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx
import psutil

from conveyor.quickstart.api_server import free_port
from tests.support.api import USERS
from tests.support.stack import config, services
from tests.support.stack.polling import StackError, wait_until
from tests.support.stack.process import Component, marked_processes
from tests.support.stack.rest import StackApi

if TYPE_CHECKING:
    from tests.support.own_postgres import OwnPostgres

BIN = Path(sys.executable).parent
DEFAULT_QUEUE = "default"  # [operators] default_queue


@dataclass(frozen=True)
class StackOptions:
    """What a test chooses about its stack.

    :param dag_folders: one DAG bundle per folder (default: the repository's ``dags/``).
    :param env: extra variables for every component and the settings loader (e.g. where the bundled
        DAGs find their S3 base or an LLM server on loopback); they win over the stack's own.
    :param users: user name -> (simple-auth role, password).
    :param workers: the Celery workers' names; each also serves a queue of that name.
    :param worker_concurrency: task slots per worker.
    :param bucket: the S3 bucket created on the stack's S3 API.
    :param storage_conn_id: the Airflow AWS connection on that S3 API, given to every component.
    :param settings_file: loaded into the metadata DB as docker-compose's airflow-init does.
    :param startup_timeout: seconds for every component to be healthy.
    """

    dag_folders: tuple[Path, ...] = (config.REPO / "dags",)
    env: Mapping[str, str] = field(default_factory=dict)
    users: Mapping[str, tuple[str, str]] = field(default_factory=lambda: dict(USERS))
    workers: tuple[str, ...] = ("w1", "w2")
    worker_concurrency: int = 2
    bucket: str = "conveyor-stack"
    storage_conn_id: str = "conveyor_storage"
    settings_file: Path = config.REPO / "airflow_settings.yaml"
    startup_timeout: float = 300


class NativeStack(StackApi):
    """The deployment; also its REST API (see :class:`~tests.support.stack.rest.StackApi`).

    Use as a context manager, or :meth:`start` then :meth:`stop` (which always cleans up, also after a
    failed start).

    :param root: an empty folder for the components' homes and logs.
    :param options: what to deploy.
    """

    _numbers = itertools.count()

    def __init__(self, root: Path, options: StackOptions | None = None) -> None:
        self.options = options or StackOptions()
        self.root = root
        self.id = f"stack-{os.getpid()}-{next(self._numbers)}"
        suffix = self.id.removeprefix("stack-").replace("-", "_")
        self.databases = services.Databases(metadata=f"airflow_stack_{suffix}", ledger=f"conveyor_stack_{suffix}")
        #: the ledger's own PostgreSQL (set by start()): fault tests restart and crash it
        self.ledger_server: OwnPostgres | None = None
        self.api_port = free_port()
        self.s3_endpoint = f"http://127.0.0.1:{free_port()}"
        super().__init__(
            f"http://127.0.0.1:{self.api_port}",
            {name: password for name, (_, password) in self.options.users.items()},
            self.diagnostics,
            lambda: self._tail_of("api-server"),
        )
        self.redis_db: int | None = None
        self.components: dict[str, Component] = {}
        #: seconds from start() to each component's first healthy check, and "total"
        self.startup_seconds: dict[str, float] = {}
        #: seconds stop() took (None until stopped)
        self.stop_seconds: float | None = None
        self._worker_log_ports = {name: free_port() for name in self.options.workers}
        self._secrets = {
            "fernet_key": _fernet_key(),
            "jwt_secret": secrets.token_urlsafe(64),
            "secret_key": secrets.token_urlsafe(64),
        }
        self._shared_env: dict[str, str] = {}
        self._celery: Any = None

    # -- life cycle ------------------------------------------------------------------------------

    def __enter__(self) -> NativeStack:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> NativeStack:
        """Start everything at once, then wait until each part is healthy; :meth:`stop` on failure."""
        started = time.monotonic()
        try:
            self._claim_services()
            self._start_processes()
            self._wait_healthy(started)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds["total"] = round(time.monotonic() - started, 1)
        return self

    def stop(self, grace: float = 15) -> None:
        """Stop every process (SIGTERM, then SIGKILL after ``grace`` s), then give back the databases.

        :raises StackError: a process of the stack is still alive afterwards.
        """
        stopping = time.monotonic()
        self.close()
        if self._celery is not None:
            self._celery.close()
            self._celery = None
        for component in self.components.values():
            component.terminate()
        deadline = time.monotonic() + grace
        try:
            for component in self.components.values():
                component.stop(grace=max(0.0, deadline - time.monotonic()))
            left = self.leftover_processes()
            if left:
                raise StackError(f"processes of {self.id} still alive after stop: {left}")
        finally:
            if self.redis_db is not None:
                services.release_redis_db(self.redis_db)
                self.redis_db = None
            self.databases.drop()
            self.stop_seconds = round(time.monotonic() - stopping, 1)

    def leftover_processes(self) -> list[str]:
        """Every live process still carrying this stack's marker (``pid cmdline``)."""
        found = []
        for proc in marked_processes(self.id):
            try:
                found.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
            except psutil.Error:  # it exited meanwhile
                continue
        return found

    def _claim_services(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        from tests.support.own_postgres import OwnPostgres

        # The ledger on a server of its own, as in production: a test may restart or crash it
        # without touching the metadata DB or anyone else's databases.
        self.ledger_server = OwnPostgres(self.id)
        self.databases = dataclasses.replace(self.databases, ledger_server=self.ledger_server)
        self.databases.create()
        self.redis_db = services.claim_redis_db(self.id, os.getpid())
        self._shared_env = config.shared_environment(
            metadata_url=self.databases.metadata_url,
            broker_url=services.redis_url(self.redis_db),
            api_url=self.url,
            dag_folders=[Path(folder).resolve() for folder in self.options.dag_folders],
            connections={self.options.storage_conn_id: services.aws_connection(self.s3_endpoint)},
            secrets=self._secrets,
            trigger_log_port=free_port(),
            extra=self.options.env,
        )

    def _airflow_env(self, name: str, **extra: str) -> dict[str, str]:
        return {**self._shared_env, **config.home_environment(self.root / name), **extra}

    def _add(self, name: str, argv: Sequence[str], env: Mapping[str, str], cwd: Path | None = None) -> Component:
        component = Component(
            self.id, name, argv, env=env, cwd=cwd or self.root / name, log_path=self.root / "logs" / f"{name}.log"
        )
        self.components[name] = component
        component.start()
        return component

    def _start_processes(self) -> None:
        airflow = str(BIN / "airflow")
        port = self.s3_endpoint.rsplit(":", 1)[1]
        self._add("moto", [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", port], config.base_environment())
        settings_env = {**self.databases.ledger_settings_env(), **self.options.env}
        self._add(
            "settings",
            [sys.executable, "-m", "conveyor.deploy.settings", str(self.options.settings_file)],
            self._airflow_env("settings", **settings_env),
        )
        self._add(
            "api-server",
            [airflow, "api-server", "--host", "127.0.0.1", "--port", str(self.api_port), "--workers", "1"],
            self._airflow_env("api-server", **self._auth_env()),
        )
        for name in ("scheduler", "dag-processor", "triggerer"):
            self._add(name, [airflow, name], self._airflow_env(name))
        for name in self.options.workers:
            self._start_worker(name)

    def _auth_env(self) -> dict[str, str]:
        import json

        users = self.options.users
        passwords = self.root / "api-server" / "simple_auth_passwords.json"
        passwords.parent.mkdir(parents=True, exist_ok=True)
        passwords.write_text(json.dumps({name: password for name, (_, password) in users.items()}))
        return {
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{n}:{role}" for n, (role, _) in users.items()),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        }

    def _start_worker(self, name: str) -> Component:
        worker = config.worker_environment(
            name, self._worker_log_ports[name], self._shared_env.get("PYTHONPATH", "")
        )
        env = self._airflow_env(name, **worker)
        argv = [
            str(BIN / "airflow"), "celery", "worker", "--celery-hostname", name,
            "--queues", f"{DEFAULT_QUEUE},{name}", "--concurrency", str(self.options.worker_concurrency),
        ]
        return self._add(name, argv, env, cwd=self.root / name / "cwd")

    # -- health ----------------------------------------------------------------------------------

    def _wait_healthy(self, started: float) -> None:
        checks = {
            "moto": self._s3_ready,
            "settings": self._settings_loaded,
            "api-server": lambda: self._health() is not None,
            "scheduler": lambda: self._component_healthy("scheduler"),
            "dag-processor": lambda: self._component_healthy("dag_processor"),
            "triggerer": lambda: self._component_healthy("triggerer"),
            **{name: (lambda name=name: self.worker_answers(name)) for name in self.options.workers},
        }
        pending = dict(checks)

        def probe() -> bool:
            for name in list(pending):
                if name != "settings":
                    self.components[name].check_running()
                if pending[name]():
                    self.startup_seconds[name] = round(time.monotonic() - started, 1)
                    del pending[name]
            return not pending

        wait_until(
            probe, timeout=self.options.startup_timeout, interval=0.5, what=f"the stack {self.id} to be healthy",
            on_timeout=lambda: f"not healthy: {sorted(pending)}\n"
            + "\n".join(self._tail_of(name) for name in pending if name in self.components),
        )

    def _s3_ready(self) -> bool:
        import botocore.exceptions

        try:
            self.s3().create_bucket(Bucket=self.options.bucket)
        except botocore.exceptions.EndpointConnectionError:
            return False
        return True

    def _settings_loaded(self) -> bool:
        loader = self.components["settings"]
        code = loader.returncode()
        if code is None:
            return False
        if code != 0:
            raise StackError(f"loading {self.options.settings_file} failed ({code}):\n{loader.tail()}")
        return True

    def _health(self) -> dict[str, Any] | None:
        try:
            response = httpx.get(f"{self.url}/api/v2/monitor/health", timeout=5)
        except httpx.HTTPError:
            return None
        return dict(response.json()) if response.status_code == 200 else None

    def _component_healthy(self, key: str) -> bool:
        health = self._health()
        return bool(health and (health.get(key) or {}).get("status") == "healthy")

    def worker_answers(self, name: str) -> bool:
        """Whether the Celery worker ``name`` answers a ping on the broker."""
        if self._celery is None:
            from celery import Celery

            self._celery = Celery(broker=self._shared_env["AIRFLOW__CELERY__BROKER_URL"])
        node = f"celery@{name}"
        replies = self._celery.control.ping(destination=[node], timeout=1.0, limit=1)
        return any(node in reply for reply in replies)

    # -- workers ---------------------------------------------------------------------------------

    @property
    def worker_names(self) -> tuple[str, ...]:
        return self.options.workers

    def worker_home(self, name: str) -> Path:
        """The worker's own folder (``airflow/`` = its AIRFLOW_HOME, ``conveyor/``, ``cwd/``)."""
        return self.root / name

    def worker_running(self, dag_id: str, run_id: str, task_id: str, timeout: float = 120) -> str:
        """The worker running a task instance (its ``hostname``), once the task is running."""
        ti = self.wait_for_task(dag_id, run_id, task_id, states={"running"}, timeout=timeout)
        return self.worker_of(ti)

    def worker_of(self, ti: Mapping[str, Any]) -> str:
        """The worker that ran (or runs) a task instance, from its ``hostname``."""
        hostname = ti.get("hostname")
        if hostname not in self.options.workers:
            raise StackError(f"task {ti['task_id']} has hostname {hostname!r}, not one of {self.options.workers}")
        return str(hostname)

    def kill_worker(self, name: str) -> None:
        """SIGKILL the worker and everything it started (its task processes too), as if its machine died."""
        self.components[name].kill()

    def restart_worker(self, name: str, timeout: float = 120) -> None:
        """Start the worker again (same home, queues and hostname) and wait until it answers."""
        component = self.components[name]
        component.stop(grace=10)
        self._start_worker(name)
        wait_until(
            lambda: (self.components[name].check_running(), self.worker_answers(name))[1],
            timeout=timeout, what=f"worker {name} to answer after restart",
            on_timeout=lambda: self._tail_of(name),
        )

    # -- S3 ----------------------------------------------------------------------------------------

    @property
    def s3_base(self) -> str:
        """``s3://<bucket>``."""
        return f"s3://{self.options.bucket}"

    def s3(self) -> Any:
        """A boto3 S3 client on the stack's S3 API."""
        return services.s3_client(self.s3_endpoint)

    # -- diagnostics -------------------------------------------------------------------------------

    def _tail_of(self, name: str, lines: int = 40) -> str:
        component = self.components.get(name)
        if component is None:
            return f"--- {name}: not started"
        return f"--- {name} ({component.log_path}):\n{component.tail(lines)}"

    def task_logs(self, dag_id: str, run_id: str) -> dict[Path, str]:
        """Every task log of a run written on any worker (path -> text)."""
        found: dict[Path, str] = {}
        for name in self.options.workers:
            folder = self.worker_home(name) / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
            if folder.is_dir():
                for path in sorted(folder.rglob("*.log")):
                    found[path] = path.read_text(errors="replace")
        return found

    def diagnostics(self, dag_id: str | None = None, run_id: str | None = None) -> str:
        """Log tails for an error message: the scheduler, dag-processor, workers, and the run's task logs."""
        parts = [self._tail_of(name, 25) for name in ("scheduler", "dag-processor", *self.options.workers)]
        if dag_id and run_id:
            for path, text in self.task_logs(dag_id, run_id).items():
                parts.append(f"--- task log {path.relative_to(self.root)}:\n" + "\n".join(text.splitlines()[-25:]))
        return "\n".join(parts)


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()
