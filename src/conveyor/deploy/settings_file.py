"""Reading ``airflow_settings.yaml`` (the Astro CLI format) into validated records, without Airflow.

The file::

    airflow:
      connections:
        - {conn_id, conn_type, conn_host, conn_schema, conn_login, conn_password, conn_port, conn_extra}
      pools:
        - {pool_name, pool_slot, pool_description}
      variables:
        - {variable_name, variable_value}

Beyond the Astro format, ``conn_description`` and ``variable_description`` are accepted, and every
string value may hold environment references, resolved when the file is read:

- ``${NAME}``: the value of ``NAME``; an error when ``NAME`` is not set;
- ``${NAME:-default}``: the value of ``NAME``, or ``default`` when it is unset or empty;
- ``$$``: a literal ``$``.

Entries whose fields are all empty (the Astro template's placeholders) are skipped. Anything else
that is malformed raises :class:`SettingsFileError` naming the file, the entry and the field, before
anything is written.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conveyor.errors import DeployError

SECTIONS: tuple[str, ...] = ("connections", "variables", "pools")

_CONNECTION_KEYS = {
    "conn_id",
    "conn_type",
    "conn_host",
    "conn_schema",
    "conn_login",
    "conn_password",
    "conn_port",
    "conn_extra",
    "conn_description",
}
_VARIABLE_KEYS = {"variable_name", "variable_value", "variable_description"}
_POOL_KEYS = {"pool_name", "pool_slot", "pool_description"}

# ``$$`` first, so an escaped dollar is never read as the start of a reference.
ENV_REFERENCE = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<default>:-[^}]*)?\}")
_DANGLING = re.compile(r"\$\{")


class SettingsFileError(DeployError, ValueError):
    """``airflow_settings.yaml`` cannot be read: the message names the file, entry and field."""


@dataclass(frozen=True)
class ConnectionSpec:
    """One connection of the file, with its references resolved."""

    conn_id: str
    conn_type: str
    host: str | None = None
    schema: str | None = None
    login: str | None = None
    password: str | None = None
    port: int | None = None
    extra: dict[str, Any] | None = None
    description: str | None = None


@dataclass(frozen=True)
class VariableSpec:
    """One variable of the file; the value is stored as text (JSON for a mapping or a list)."""

    key: str
    value: str
    description: str | None = None


@dataclass(frozen=True)
class PoolSpec:
    """One pool of the file."""

    name: str
    slots: int
    description: str = ""


@dataclass(frozen=True)
class SettingsFile:
    """The validated content of a settings file."""

    path: Path
    connections: tuple[ConnectionSpec, ...] = ()
    variables: tuple[VariableSpec, ...] = ()
    pools: tuple[PoolSpec, ...] = ()
    skipped_blank: int = 0


def resolve_references(text: str, env: Mapping[str, str], where: str) -> str:
    """Replace ``${NAME}``, ``${NAME:-default}`` and ``$$`` in ``text``.

    :param text: a string value of the file.
    :param env: the environment to resolve names from.
    :param where: the value's place in the file, for error messages.
    :raises SettingsFileError: a name is unset and has no default, or a reference is not closed.
    """

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group("name")
        default = match.group("default")
        value = env.get(name)
        if default is not None:
            return value if value else default[2:]
        if value is None:
            raise SettingsFileError(
                f"{where}: environment variable {name} is not set (use ${{{name}:-default}})"
            )
        return value

    # A ``${`` that is neither a whole reference nor escaped is a typo: refuse it, never store it.
    if _DANGLING.search(ENV_REFERENCE.sub("", text)):
        raise SettingsFileError(f"{where}: malformed environment reference in {text!r} (expected ${{NAME}})")
    return ENV_REFERENCE.sub(substitute, text)


def _resolve_tree(value: Any, env: Mapping[str, str], where: str) -> Any:
    if isinstance(value, str):
        return resolve_references(value, env, where)
    if isinstance(value, list):
        return [_resolve_tree(item, env, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        return {key: _resolve_tree(item, env, f"{where}.{key}") for key, item in value.items()}
    return value


def _text(entry: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str | None:
    value = entry.get(key)
    if value is None or value == "":
        if required:
            raise SettingsFileError(f"{where}: {key} is required")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise SettingsFileError(f"{where}: {key} must be text, got {type(value).__name__}")
    return str(value)


def _integer(entry: Mapping[str, Any], key: str, where: str, *, required: bool, minimum: int) -> int | None:
    value = entry.get(key)
    if value is None or value == "":
        if required:
            raise SettingsFileError(f"{where}: {key} is required")
        return None
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        number = int(value)
    except (TypeError, ValueError):
        raise SettingsFileError(f"{where}: {key} must be an integer, got {value!r}") from None
    if number < minimum:
        raise SettingsFileError(f"{where}: {key} must be at least {minimum}, got {number}")
    return number


def _extra(value: Any, where: str) -> dict[str, Any] | None:
    if value is None or value == "" or value == {}:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise SettingsFileError(f"{where}: conn_extra is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise SettingsFileError(f"{where}: conn_extra must be a mapping, got {type(value).__name__}")
    return value


def _check_keys(entry: Any, allowed: set[str], where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise SettingsFileError(f"{where}: expected a mapping of fields, got {type(entry).__name__}")
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise SettingsFileError(
            f"{where}: unknown field(s) {', '.join(map(str, unknown))}; allowed: {', '.join(sorted(allowed))}"
        )
    return entry


def _is_blank(entry: Any) -> bool:
    return isinstance(entry, dict) and all(value in (None, "", {}) for value in entry.values())


def _connection(entry: dict[str, Any], where: str) -> ConnectionSpec:
    conn_id = _text(entry, "conn_id", where, required=True)
    assert conn_id is not None
    where = f"{where} ({conn_id})"
    conn_type = _text(entry, "conn_type", where, required=True)
    assert conn_type is not None
    return ConnectionSpec(
        conn_id=conn_id,
        conn_type=conn_type,
        host=_text(entry, "conn_host", where),
        schema=_text(entry, "conn_schema", where),
        login=_text(entry, "conn_login", where),
        password=_text(entry, "conn_password", where),
        port=_integer(entry, "conn_port", where, required=False, minimum=1),
        extra=_extra(entry.get("conn_extra"), where),
        description=_text(entry, "conn_description", where),
    )


def _variable(entry: dict[str, Any], where: str) -> VariableSpec:
    key = _text(entry, "variable_name", where, required=True)
    assert key is not None
    value = entry.get("variable_value")
    if value is None:
        raise SettingsFileError(f'{where} ({key}): variable_value is required (use "" for an empty value)')
    if isinstance(value, dict | list):
        text = json.dumps(value, sort_keys=True)
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    return VariableSpec(key=key, value=text, description=_text(entry, "variable_description", where))


def _pool(entry: dict[str, Any], where: str) -> PoolSpec:
    name = _text(entry, "pool_name", where, required=True)
    assert name is not None
    where = f"{where} ({name})"
    # -1 is Airflow's "unlimited".
    slots = _integer(entry, "pool_slot", where, required=True, minimum=-1)
    assert slots is not None
    return PoolSpec(name=name, slots=slots, description=_text(entry, "pool_description", where) or "")


_PARSERS = {
    "connections": (_CONNECTION_KEYS, _connection, "conn_id"),
    "variables": (_VARIABLE_KEYS, _variable, "variable_name"),
    "pools": (_POOL_KEYS, _pool, "pool_name"),
}


def read_settings_file(path: str | Path, env: Mapping[str, str] | None = None) -> SettingsFile:
    """Parse and validate a settings file; nothing is written anywhere.

    :param path: the ``airflow_settings.yaml`` to read.
    :param env: where ``${NAME}`` references resolve from (default: ``os.environ``).
    :raises SettingsFileError: the file is missing, not YAML, or an entry is malformed.
    """
    path = Path(path)
    env = os.environ if env is None else env
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SettingsFileError(f"{path}: no such settings file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SettingsFileError(f"{path}: not valid YAML{at}: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict) or not isinstance(raw.get("airflow", {}), dict | None):
        raise SettingsFileError(f"{path}: expected a top-level 'airflow:' mapping")
    unknown_top = sorted(set(raw) - {"airflow"})
    if unknown_top:
        raise SettingsFileError(f"{path}: unknown top-level key(s) {', '.join(map(str, unknown_top))}")
    body = raw.get("airflow") or {}
    unknown_sections = sorted(set(body) - set(SECTIONS))
    if unknown_sections:
        raise SettingsFileError(
            f"{path}: unknown section(s) airflow.{', airflow.'.join(map(str, unknown_sections))};"
            f" expected {', '.join(SECTIONS)}"
        )

    parsed: dict[str, list[Any]] = {section: [] for section in SECTIONS}
    skipped = 0
    for section in SECTIONS:
        entries = body.get(section) or []
        if not isinstance(entries, list):
            raise SettingsFileError(f"{path}: airflow.{section} must be a list, got {type(entries).__name__}")
        allowed, build, id_key = _PARSERS[section]
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            where = f"{path}: airflow.{section}[{index}]"
            if entry is None or _is_blank(entry):
                skipped += 1
                continue
            entry = _resolve_tree(_check_keys(entry, allowed, where), env, where)
            spec = build(entry, where)
            ident = str(entry[id_key])
            if ident in seen:
                raise SettingsFileError(f"{where}: duplicate {id_key} {ident!r}")
            seen.add(ident)
            parsed[section].append(spec)
    return SettingsFile(
        path=path,
        connections=tuple(parsed["connections"]),
        variables=tuple(parsed["variables"]),
        pools=tuple(parsed["pools"]),
        skipped_blank=skipped,
    )
