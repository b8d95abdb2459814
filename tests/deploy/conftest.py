"""Fixtures of the deployment tests: the compose file as written and as Compose would resolve it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.airflow_items import delete_test_items

REPO = Path(__file__).resolve().parents[2]
# CI clones the repository with shared/ beside it, as on the development machines.
SHARED = REPO.parent / "shared"
COMPOSE_FILE = REPO / "docker-compose.yaml"
SETTINGS_FILE = REPO / "airflow_settings.yaml"


def compose_interpolate(value: Any, env: dict[str, str] | None = None) -> Any:
    """Resolve Compose's ``${NAME:-default}`` / ``$$`` in every string, as ``docker compose`` would.

    A ``$`` that is neither ``$$`` nor a complete ``${...}`` fails the test: Compose would read it as
    a variable of the host.
    """
    from conveyor.deploy.settings_file import ENV_REFERENCE, resolve_references

    env = env or {}
    if isinstance(value, str):
        assert "$" not in ENV_REFERENCE.sub("", value), f"unescaped $ in {value!r}: write $$ for the shell"
        return resolve_references(value, env, "docker-compose.yaml")
    if isinstance(value, list):
        return [compose_interpolate(item, env) for item in value]
    if isinstance(value, dict):
        return {key: compose_interpolate(item, env) for key, item in value.items()}
    return value


@pytest.fixture(scope="session")
def compose_raw() -> dict[str, Any]:
    """docker-compose.yaml parsed (anchors and merge keys resolved), variables not yet resolved."""
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="session")
def compose(compose_raw: dict[str, Any]) -> dict[str, Any]:
    """docker-compose.yaml as Compose runs it with no .env: every variable at its default."""
    return compose_interpolate(compose_raw)


@pytest.fixture
def metadata(airflow_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The session's metadata DB without the shipped or deploytest_* items, before and after the test."""
    # The file's defaults apply unless a test sets one of the variables it reads.
    for name in set(re.findall(r"\$\{([A-Z0-9_]+)", SETTINGS_FILE.read_text())):
        monkeypatch.delenv(name, raising=False)
    delete_test_items()
    yield
    delete_test_items()
