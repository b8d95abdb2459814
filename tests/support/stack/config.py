"""The environment of the stack's components: the Airflow configuration they share, and each one's own.

Option names were checked in Airflow 3.3.2's ``airflow/config_templates/config.yml`` and the Celery
provider's ``get_provider_info()``; every value is set through ``AIRFLOW__SECTION__KEY``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
WORKER_PATH = Path(__file__).resolve().parent / "worker_path"

# Short enough that a test sees a SIGKILLed worker's task retried within tens of seconds.
TIMING: dict[str, str] = {
    # The scheduler job's heartbeat (default 5 s): it shows as healthy sooner after start.
    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
    # A running task instance whose last heartbeat is older than this is failed by the scheduler, or
    # put up for retry when it has retries left (default 300 s).
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "15",
    # How often the scheduler looks for such task instances (default 10 s).
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    # How often a task's supervisor heartbeats to the execution API (default 5 s). In 3.3 this, not
    # [scheduler] task_instance_heartbeat_sec (read by nothing), sets the beat: five beats per
    # timeout, so a slow API server on a busy machine does not fail a healthy task.
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "3",
    # How often the dag-processor looks for new files in a bundle (default 300 s).
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    # How often a parsed DAG file is parsed again (default 30 s). The tests never change a DAG file,
    # and three stacks re-parsing theirs every 30 s cost the suite a tenth of a core.
    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
    # The bundled DAGs' first retry (conveyor.default_args; default 60 s): a task failed by an injected
    # fault goes again within seconds.
    "AIRFLOW__CONVEYOR__RETRY_DELAY_SECONDS": "5",
}

# The variables of the test session's own Airflow environment (tests/conftest.py) must not leak in.
_INHERITED_PREFIXES = ("AIRFLOW", "CONVEYOR_", "_AIRFLOW")


def base_environment() -> dict[str, str]:
    """The test process's environment without its Airflow and Conveyor settings."""
    return {key: value for key, value in os.environ.items() if not key.startswith(_INHERITED_PREFIXES)}


def bundle_config(dag_folders: Sequence[Path]) -> str:
    """``[dag_processor] dag_bundle_config_list``: one local bundle per folder, named after it."""
    names = [folder.name for folder in dag_folders]
    if len(set(names)) != len(names):
        raise ValueError(f"DAG folders need distinct names: {names}")
    return json.dumps(
        [
            {"name": folder.name, "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
             "kwargs": {"path": str(folder)}}
            for folder in dag_folders
        ]
    )


def shared_environment(
    *,
    metadata_url: str,
    broker_url: str,
    api_url: str,
    dag_folders: Sequence[Path],
    connections: Mapping[str, dict[str, object]],
    secrets: Mapping[str, str],
    trigger_log_port: int,
    extra: Mapping[str, str],
) -> dict[str, str]:
    """What every component of one stack is given (before its own home and ports).

    :param metadata_url: SQLAlchemy URL of the metadata DB.
    :param broker_url: the Celery broker (a Redis database).
    :param api_url: the API server's base URL (``http://127.0.0.1:PORT``).
    :param dag_folders: one DAG bundle each; the first is also ``[core] dags_folder``.
    :param connections: conn id -> connection as JSON, given as ``AIRFLOW_CONN_<ID>``.
    :param secrets: ``fernet_key``, ``jwt_secret`` and ``secret_key``: one value for all components.
    :param trigger_log_port: the triggerer's log server port (default 8794 would clash between stacks).
    :param extra: the test's own variables, last (they may override anything above).
    """
    env = base_environment()
    env.update(
        {
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_url,
            "AIRFLOW__CELERY__BROKER_URL": broker_url,
            # Celery's results in the metadata DB, as in docker-compose.yaml.
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + metadata_url,
            # Tokens signed by one component verify in all; secrets stored by one decrypt in all;
            # [api] secret_key signs the API server's log requests to the workers' log servers.
            "AIRFLOW__CORE__FERNET_KEY": secrets["fernet_key"],
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets["jwt_secret"],
            "AIRFLOW__API__SECRET_KEY": secrets["secret_key"],
            # Without BASE_URL a changed API port leaves tasks calling 8080 (connection refused).
            "AIRFLOW__API__BASE_URL": api_url,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api_url}/execution/",
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dag_folders[0]),
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": bundle_config(dag_folders),
            # The conveyor plugin registers through the installed package's entry point; the project's
            # plugins/ folder holds nothing of it (as in docker-compose.yaml, where this is mounted).
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(trigger_log_port),
            # Read-only data of the project (sample data, suites, prompts): include/ beside the DAGs
            # folder, [conveyor] include_folder's default, as docker-compose mounts it.
            **TIMING,
        }
    )
    for conn_id, conn in connections.items():
        env[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
    env.update(extra)
    return env


def home_environment(home: Path) -> dict[str, str]:
    """A component's own folders: ``AIRFLOW_HOME`` (so its own logs folder), an empty ``CONVEYOR_HOME``,
    and its own bundle storage (the default is one folder in /tmp for every process on the machine).

    :param home: the component's folder.
    """
    for sub in ("airflow", "conveyor", "bundles"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    return {
        "AIRFLOW_HOME": str(home / "airflow"),
        "CONVEYOR_HOME": str(home / "conveyor"),
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_STORAGE_PATH": str(home / "bundles"),
    }


def worker_environment(name: str, log_server_port: int, pythonpath: str = "") -> dict[str, str]:
    """What a Celery worker adds: its task-instance hostname and its own log server port.

    :param name: the worker's name (also its Celery hostname and the tasks' ``hostname``).
    :param log_server_port: ``[logging] worker_log_server_port`` of this worker.
    :param pythonpath: the ``PYTHONPATH`` the worker would have otherwise (kept after the hostname module).
    """
    return {
        "AIRFLOW__CORE__HOSTNAME_CALLABLE": "stack_hostname.hostname",
        "CONVEYOR_STACK_HOSTNAME": name,
        "PYTHONPATH": os.pathsep.join(part for part in (str(WORKER_PATH), pythonpath) if part),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(log_server_port),
    }
