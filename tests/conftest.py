"""Test set-up shared by every test: a real PostgreSQL ledger and a real Airflow environment.

Environment variables that Airflow reads at import time are set here, before any test module
imports Airflow. Every session gets databases of its own, dropped at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

from tests.support import postgres, scheduling

if TYPE_CHECKING:
    from tests.ai.llm_server import LLMServer
    from tests.support.stack import NativeStack, StackOptions

REPO = Path(__file__).resolve().parents[1]
SESSION = f"{os.getpid()}"
LEDGER_DB = f"conveyor_t_{SESSION}"
AIRFLOW_DB = f"airflow_t_{SESSION}"
_TMP = Path(tempfile.mkdtemp(prefix=f"conveyor-test-{SESSION}-"))

os.environ.update(
    {
        "AIRFLOW_HOME": str(_TMP / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # As the deployment files set it: sensors defer (the review steps wait in the triggerer).
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": postgres.sqlalchemy_url_for(AIRFLOW_DB),
        "AIRFLOW__API_AUTH__JWT_SECRET": "conveyor-tests-jwt-secret",
        # Pinned, so `airflow` subprocesses and in-process code encrypt connections alike.
        "AIRFLOW__CORE__FERNET_KEY": "qcABO0tNa036bZU01tsgSJZvSVgN3kg99ZmIFpax5Z8=",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": "http://127.0.0.1:28080/execution/",
        # The bundled DAGs, and the DAGs the operator tests run (dag.test() needs them in a bundle).
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(
            [
                {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                 "kwargs": {"path": str(REPO / "dags")}},
                {"name": "test-dags", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                 "kwargs": {"path": str(REPO / "tests" / "dag_fixtures")}},
            ]
        ),
        "AIRFLOW_CONN_CONVEYOR_LEDGER": postgres.airflow_conn_uri_for(LEDGER_DB),
        "CONVEYOR_HOME": str(_TMP / "conveyor"),
        "AIRFLOW__CONVEYOR__INCLUDE_FOLDER": str(REPO / "include"),
    }
)
for _name in ("CONVEYOR_LEDGER_DSN", "AIRFLOW__CONVEYOR__STORAGE_BASE", "AIRFLOW__CONVEYOR__STORAGE_CONN_ID"):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session")
def ledger_dsn() -> Iterator[str]:
    """A migrated ledger database of this session."""
    from conveyor.ledger import Ledger

    dsn = postgres.create_database(LEDGER_DB)
    Ledger(dsn).upgrade()
    yield dsn
    postgres.drop_database(LEDGER_DB)


def truncate_ledger(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT quote_ident(table_name) FROM information_schema.tables"
                " WHERE table_schema = 'conveyor' AND table_type = 'BASE TABLE'"
                " AND table_name <> 'schema_migrations'"
            )
        ]
        if tables:
            conn.execute("TRUNCATE " + ", ".join(f"conveyor.{t}" for t in tables) + " RESTART IDENTITY")
        # The invoice example's stand-in ERP lives in the same database.
        conn.execute("DROP SCHEMA IF EXISTS example_erp CASCADE")


@pytest.fixture(autouse=True)
def _no_idle_ledger_connections_left() -> Iterator[None]:
    """Each test's idle ledger connections are closed after it: a database a test made can be
    dropped, and the server's connection slots are not held by tests that are over."""
    yield
    from conveyor.ledger import pool

    pool.clear()


@pytest.fixture
def ledger(ledger_dsn: str):
    """The session's ledger, emptied for this test, with the test workflows declared."""
    from conveyor.ledger import Ledger, workflows
    from tests.support.workflows import declare_all

    truncate_ledger(ledger_dsn)
    workflows.forget()
    ledger = Ledger(ledger_dsn)
    declare_all(ledger)
    return ledger


@pytest.fixture
def fresh_db(request: pytest.FixtureRequest) -> Iterator[str]:
    """An empty database of its own (for migration tests); dropped afterwards."""
    name = f"conveyor_fresh_{SESSION}_{abs(hash(request.node.nodeid)) % 10**8}"
    dsn = postgres.create_database(name)
    yield dsn
    postgres.drop_database(name)


@pytest.fixture(scope="session")
def airflow_db(ledger_dsn: str) -> Iterator[str]:
    """A migrated Airflow metadata database of this session (cloned from a template)."""
    from tests.support.airflow_env import create_metadata_db, dag_test_keeps_declared_params

    create_metadata_db(AIRFLOW_DB)
    dag_test_keeps_declared_params()
    yield os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    from airflow.settings import dispose_orm

    dispose_orm()
    postgres.drop_database(AIRFLOW_DB)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_TMP, ignore_errors=True)


def _wants_api_server(session: pytest.Session) -> bool:
    # Under pytest-xdist every worker collects every test but runs only its share: a worker starts
    # the API server when its first test asks for it, not at the start.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    return any("api_server" in getattr(item, "fixturenames", ()) for item in session.items)


@pytest.fixture(scope="session", autouse=True)
def _api_server_process(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Start the API server as soon as the session starts, when any test needs it: it takes tens of
    seconds to come up, and the tests that use it find it ready."""
    if not _wants_api_server(request.session):
        yield None
        return
    from conveyor.quickstart.api_server import ApiServerProcess
    from tests.support.api import USERS

    request.getfixturevalue("airflow_db")
    process = ApiServerProcess(tmp_path_factory.mktemp("api-server"), USERS)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def api_server(_api_server_process, airflow_db: str, tmp_path_factory: pytest.TempPathFactory):
    """A real ``airflow api-server`` on the session's metadata DB, the Conveyor plugin mounted."""
    if _api_server_process is not None:
        yield _api_server_process.wait_ready(180)
        return
    from conveyor.quickstart.api_server import running_api_server
    from tests.support.api import USERS

    with running_api_server(tmp_path_factory.mktemp("api-server"), USERS) as server:
        yield server


# -- the native deployment (tests/support/stack) ----------------------------------------------------

#: The smoke DAGs' hand-off objects live below this key prefix of the stack's bucket.
STACK_SMOKE_PREFIX = "smoke"
_STARTED_STACKS: list[NativeStack] = []


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test on the native stack carries the ``stack`` marker (``pytest -m stack`` runs them alone);
    the longest units of work start first (tests/support/scheduling.py)."""
    for item in items:
        if "stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.stack)
    scheduling.longest_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest-xdist shares out units of work (tests/support/scheduling.py), not single tests."""
    return scheduling.make_scheduler(config, log)


#: Where the bundled workflows keep their files on the stack: every Conveyor file on its S3 API.
STACK_CONVEYOR_PREFIX = "conveyor"
#: The stack's pydanticai connection to the loopback LLM server (a DAG uses it when a Variable says so).
STACK_LLM_CONN = "conveyor_llm_stack"


@pytest.fixture(scope="session")
def stack_llm() -> Iterator[LLMServer]:
    """The OpenAI-compatible test server on 127.0.0.1 the stack's workers may call (tests/ai/llm_server.py)."""
    from tests.ai.llm_server import LLMServer

    server = LLMServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def stack_mailbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, list[str]]]:
    """A real SMTP server on 127.0.0.1 the stack's alerts go to: (port, the subjects received so far)."""
    from conveyor.quickstart.mailbox import local_mailbox

    with local_mailbox(tmp_path_factory.mktemp("stack-mail")) as mailbox:
        yield mailbox


@pytest.fixture(scope="session")
def stack_options(stack_llm: LLMServer, stack_mailbox: tuple[int, list[str]]) -> StackOptions:
    """What the session's stack deploys: the bundled DAGs (their files on S3, an LLM on loopback one
    Variable away) and the harness's smoke DAGs.

    Override this fixture in a ``conftest.py`` to deploy something else (that directory's tests then
    get a stack of their own).
    """
    from tests.support.stack import StackOptions

    options = StackOptions(dag_folders=(REPO / "dags", REPO / "tests" / "stack_dags"))
    llm = {"conn_type": "pydanticai", "host": stack_llm.base_url, "password": "sk-stack-test",
           "extra": {"model": "openai-chat:fake-model"}}
    return dataclasses.replace(
        options,
        env={
            "STACK_SMOKE_S3_BASE": f"s3://{options.bucket}/{STACK_SMOKE_PREFIX}",
            "STACK_SMOKE_CONN_ID": options.storage_conn_id,
            "AIRFLOW__CONVEYOR__STORAGE_BASE": f"s3://{options.bucket}/{STACK_CONVEYOR_PREFIX}",
            "AIRFLOW__CONVEYOR__STORAGE_CONN_ID": options.storage_conn_id,
            "AIRFLOW__CONVEYOR__REVIEW_POKE_SECONDS": "2",
            f"AIRFLOW_CONN_{STACK_LLM_CONN.upper()}": json.dumps(llm),
            # Alerts reach a person: the session's mailbox (what the shipped conveyor_smtp would be).
            "AIRFLOW_CONN_CONVEYOR_SMTP": json.dumps({
                "conn_type": "smtp", "host": "127.0.0.1", "port": stack_mailbox[0],
                "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "conveyor@stack", "retry_limit": 1},
            }),
            "AIRFLOW_VAR_CONVEYOR_ALERT_EMAIL": "ops@stack",
        },
    )


@pytest.fixture(scope="session")
def stack(stack_options: StackOptions, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeStack]:
    """A real native Airflow deployment (CeleryExecutor, two workers, S3 on loopback), once per session.

    Its logs stay in pytest's temporary folder (``stack*/logs``) after the session.
    """
    from tests.support.stack import NativeStack

    with NativeStack(tmp_path_factory.mktemp("stack"), stack_options) as native:
        _STARTED_STACKS.append(native)
        yield native


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for native in _STARTED_STACKS:
        timings = ", ".join(f"{name} {seconds}" for name, seconds in native.startup_seconds.items())
        terminalreporter.write_line(
            f"native stack {native.id}: healthy after (s) {timings}; stopped in {native.stop_seconds} s; "
            f"logs in {native.root / 'logs'}"
        )
