"""Load ``airflow_settings.yaml`` into the Airflow metadata DB: connections, variables, pools.

``python -m conveyor.deploy.settings airflow_settings.yaml`` is what the native quickstart and the
``airflow-init`` service of ``docker-compose.yaml`` both run. It upserts through Airflow's own
models (``Connection``, ``Variable``, ``Pool``) in one transaction: the whole file is validated
first, so a malformed file changes nothing; running it twice changes nothing; an edited value is
updated. Items that exist in Airflow but not in the file are left alone. The file format and its
``${ENV}`` references are described in :mod:`conveyor.deploy.settings_file`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conveyor.deploy.settings_file import (
    SECTIONS,
    ConnectionSpec,
    PoolSpec,
    SettingsFileError,
    VariableSpec,
    read_settings_file,
)
from conveyor.deploy.streams import stdout_to_stderr

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = ["KindSummary", "LoadSummary", "SettingsFileError", "load_airflow_settings", "main"]


@dataclass
class KindSummary:
    """What happened to the items of one section."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.created) + len(self.updated) + len(self.unchanged)

    def describe(self) -> str:
        parts = [
            f"{len(names)} {label}"
            for label, names in (
                ("created", self.created),
                ("updated", self.updated),
                ("unchanged", self.unchanged),
            )
            if names
        ]
        return f"{self.total} ({', '.join(parts) or 'none'})"


@dataclass
class LoadSummary:
    """The outcome of :func:`load_airflow_settings`."""

    path: Path
    connections: KindSummary = field(default_factory=KindSummary)
    variables: KindSummary = field(default_factory=KindSummary)
    pools: KindSummary = field(default_factory=KindSummary)
    skipped_blank: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(kind.created or kind.updated for kind in (self.connections, self.variables, self.pools))

    def line(self) -> str:
        """One line for logs: counts per section, then the warnings."""
        text = (
            f"{self.path}: connections {self.connections.describe()}, variables "
            f"{self.variables.describe()}, pools {self.pools.describe()}"
        )
        if self.skipped_blank:
            text += f"; {self.skipped_blank} blank entr{'y' if self.skipped_blank == 1 else 'ies'} skipped"
        if self.warnings:
            text += "; warnings: " + "; ".join(self.warnings)
        return text


def load_airflow_settings(path: str | Path, *, only: Iterable[str] | None = None) -> LoadSummary:
    """Upsert the connections, variables and pools of a settings file into Airflow's metadata DB.

    :param path: the ``airflow_settings.yaml`` to load.
    :param only: the sections to load (``connections``, ``variables``, ``pools``); all by default.
    :return: what was created, updated or left unchanged, and warnings (a ``conn_type`` no installed
        provider knows, an item shadowed by an ``AIRFLOW_CONN_*``/``AIRFLOW_VAR_*`` variable).
    :raises SettingsFileError: the file is malformed; nothing has been written.
    """
    sections = _sections(only)
    settings = read_settings_file(path)
    summary = LoadSummary(path=Path(path), skipped_blank=settings.skipped_blank)

    from airflow.utils.session import create_session

    with create_session() as session:
        if "connections" in sections:
            known = _known_conn_types()
            for conn in settings.connections:
                _upsert_connection(session, conn, summary.connections)
                if conn.conn_type not in known:
                    summary.warnings.append(
                        f"connection {conn.conn_id!r} has conn_type {conn.conn_type!r}, which no installed "
                        "provider registers (stored anyway)"
                    )
                _warn_if_shadowed(summary, "connection", conn.conn_id, f"AIRFLOW_CONN_{conn.conn_id.upper()}")
        if "variables" in sections:
            for var in settings.variables:
                _upsert_variable(session, var, summary.variables)
                _warn_if_shadowed(summary, "variable", var.key, f"AIRFLOW_VAR_{var.key.upper()}")
        if "pools" in sections:
            for pool in settings.pools:
                _upsert_pool(session, pool, summary.pools)
    return summary


def _sections(only: Iterable[str] | None) -> set[str]:
    if only is None:
        return set(SECTIONS)
    chosen = {only} if isinstance(only, str) else set(only)
    unknown = sorted(chosen - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown section(s) {', '.join(unknown)}; expected some of {', '.join(SECTIONS)}")
    return chosen


def _known_conn_types() -> set[str]:
    from airflow.providers_manager import ProvidersManager

    # Reads provider metadata only; no hook class is imported.
    return {meta.connection_type for meta in ProvidersManager().iter_connection_type_hook_ui_metadata()}


def _warn_if_shadowed(summary: LoadSummary, kind: str, name: str, env_name: str) -> None:
    # Airflow reads the environment before the metadata DB: the stored value would never be used.
    if os.environ.get(env_name):
        summary.warnings.append(f"{kind} {name!r} is shadowed by {env_name} in this environment")


def _upsert_connection(session: Session, spec: ConnectionSpec, summary: KindSummary) -> None:
    import json

    from airflow.models import Connection
    from sqlalchemy import select

    wanted: dict[str, Any] = {
        "conn_type": spec.conn_type,
        "host": spec.host,
        "schema": spec.schema,
        "login": spec.login,
        "password": spec.password,
        "port": spec.port,
        "description": spec.description,
    }
    existing = session.scalar(select(Connection).where(Connection.conn_id == spec.conn_id))
    if existing is None:
        conn = Connection(conn_id=spec.conn_id, extra=spec.extra, **wanted)
        if conn.conn_id != spec.conn_id:
            raise SettingsFileError(f"connection id {spec.conn_id!r} has characters Airflow does not allow")
        session.add(conn)
        summary.created.append(spec.conn_id)
        return
    current_extra = existing.extra_dejson if existing.extra else None
    same = all(getattr(existing, name) == value for name, value in wanted.items()) and (
        (current_extra or None) == (spec.extra or None)
    )
    if same:
        summary.unchanged.append(spec.conn_id)
        return
    for name, value in wanted.items():
        setattr(existing, name, value)
    if spec.password is None:
        # Airflow's password setter ignores an empty value; a password removed from the file must go.
        existing._password = None
        existing.is_encrypted = False
    existing.extra = json.dumps(spec.extra) if spec.extra else None
    summary.updated.append(spec.conn_id)


def _upsert_variable(session: Session, spec: VariableSpec, summary: KindSummary) -> None:
    from airflow.models import Variable
    from sqlalchemy import select

    existing = session.scalar(select(Variable).where(Variable.key == spec.key))
    if existing is None:
        session.add(Variable(key=spec.key, val=spec.value, description=spec.description))
        summary.created.append(spec.key)
        return
    if existing.val == spec.value and existing.description == spec.description:
        summary.unchanged.append(spec.key)
        return
    existing.val = spec.value
    existing.description = spec.description
    summary.updated.append(spec.key)


def _upsert_pool(session: Session, spec: PoolSpec, summary: KindSummary) -> None:
    from airflow.models import Pool
    from sqlalchemy import select

    existing = session.scalar(select(Pool).where(Pool.pool == spec.name))
    if existing is None:
        session.add(
            Pool(pool=spec.name, slots=spec.slots, description=spec.description, include_deferred=False)
        )
        summary.created.append(spec.name)
        return
    if existing.slots == spec.slots and (existing.description or "") == spec.description:
        summary.unchanged.append(spec.name)
        return
    # include_deferred is not part of the file's format: an operator's choice in the UI is kept.
    existing.slots = spec.slots
    existing.description = spec.description
    summary.updated.append(spec.name)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m conveyor.deploy.settings PATH [--only SECTION ...]``: load and print one line.

    :param argv: the arguments (default: ``sys.argv[1:]``).
    :return: 0 when loaded, 1 when the file is malformed (nothing written).
    """
    parser = argparse.ArgumentParser(
        prog="python -m conveyor.deploy.settings",
        description="Load the connections, variables and pools of an airflow_settings.yaml into Airflow.",
    )
    parser.add_argument("path", type=Path, help="the settings file (Astro CLI format)")
    parser.add_argument(
        "--only", action="append", choices=SECTIONS, help="load only this section (repeatable)"
    )
    args = parser.parse_args(argv)
    try:
        with stdout_to_stderr():
            summary = load_airflow_settings(args.path, only=args.only)
    except SettingsFileError as exc:
        print(f"conveyor settings: {exc}", file=sys.stderr)
        return 1
    print(summary.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
