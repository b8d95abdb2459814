"""Conveyor's deployment settings: the ``[conveyor]`` section of Airflow's configuration.

Each option is read like any Airflow option: ``AIRFLOW__CONVEYOR__<OPTION>`` in the environment
first, then ``airflow.cfg``. The defaults are declared once, in :data:`OPTIONS`, which the provider
info (:mod:`conveyor.provider`) publishes to ``airflow config list``.

The environment is read without importing Airflow, so the ``conveyor`` CLI stays fast; Airflow's
configuration is consulted only when Airflow is already imported (tasks, the API server) or the
caller asks for it.
"""

from __future__ import annotations

import os
import sys

SECTION = "conveyor"

#: option -> (default, type, description); the one place the defaults live.
OPTIONS: dict[str, tuple[str, str, str]] = {
    "ledger_conn_id": (
        "conveyor_ledger",
        "string",
        "The Airflow connection (Postgres) of the item ledger.",
    ),
    "ledger_pool_size": (
        "1",
        "integer",
        "Idle connections to the ledger each process keeps for its next use (the API server, the "
        "triggerer, a task's chunks), per ledger database; 0 opens and closes a connection for every use.",
    ),
    "ledger_pool_idle_seconds": (
        "60",
        "integer",
        "Seconds an idle pooled ledger connection is kept before it is closed, so that a process gone "
        "quiet gives its database connection slot back.",
    ),
    "ledger_reconnect_seconds": (
        "30",
        "integer",
        "Seconds a task keeps trying to connect while the ledger's server refuses connections (a restart, "
        "crash recovery) before the task fails and Airflow retries it. The CLI and the API never wait.",
    ),
    "retry_delay_seconds": (
        "60",
        "integer",
        "Seconds before a failed step of a guarded workflow is tried again (conveyor.default_args); each "
        "later retry waits twice as long, up to ten minutes.",
    ),
    "storage_base": (
        "",
        "string",
        "Where every file Conveyor reads and writes lives (landing snapshots, reports, archive, inbox), "
        "as an Airflow object-storage URL: file:///shared/conveyor, s3://bucket/prefix, gs://... "
        "Empty: file://$CONVEYOR_HOME/files on the local disk, for a single machine only.",
    ),
    "storage_conn_id": (
        "",
        "string",
        "The Airflow connection object storage uses (e.g. an aws connection for s3://). Empty: none.",
    ),
    "include_folder": (
        "",
        "string",
        "Where relative suite, prompt and training-data paths are found when they are not next to the DAG "
        "file. Empty: the include/ folder beside the DAGs folder (the Astro CLI layout).",
    ),
    "review_poke_seconds": (
        "60",
        "integer",
        "Default seconds between two looks of a review sensor at the ledger (it also wakes on decisions).",
    ),
    "review_claim_minutes": (
        "10",
        "integer",
        "Minutes an opened review item stays claimed by its reviewer before others may take it.",
    ),
}


def get(option: str, *, use_airflow: bool | None = None) -> str:
    """The value of ``[conveyor] option``.

    :param option: a name of :data:`OPTIONS`.
    :param use_airflow: read ``airflow.cfg`` too (default: only when Airflow is already imported).
    """
    default = OPTIONS[option][0]
    env = os.environ.get(f"AIRFLOW__{SECTION.upper()}__{option.upper()}")
    if env is not None:
        return env
    if use_airflow is None:
        use_airflow = "airflow.configuration" in sys.modules or "airflow.sdk.configuration" in sys.modules
    if not use_airflow:
        return default
    try:
        from airflow.configuration import conf
    except ImportError:  # a Task-SDK-only worker
        # The SDK's conf is its lazy twin of core's (a module __getattr__); same get().
        from airflow.sdk.configuration import conf  # type: ignore[no-redef]  # the same name, on a worker without core
    return str(conf.get(SECTION, option, fallback=default))


def get_int(option: str) -> int:
    value = get(option)
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"[{SECTION}] {option} must be a whole number, got {value!r}") from None


def ledger_conn_id() -> str:
    """The ledger's Airflow connection id."""
    return get("ledger_conn_id") or OPTIONS["ledger_conn_id"][0]
