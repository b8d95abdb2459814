"""docker-compose.yaml and the Dockerfile: valid Compose, and a stack whose parts agree with each other.

No Docker engine runs here, so the file is checked against the Compose specification's JSON schema
and its pieces are checked against each other as Compose would resolve them (no .env: defaults).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

from tests.deploy.conftest import COMPOSE_FILE, REPO, SETTINGS_FILE, SHARED, compose_interpolate

AIRFLOW_SERVICES = (
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "airflow-worker",
    "airflow-init",
)
LONG_RUNNING = tuple(name for name in AIRFLOW_SERVICES if name != "airflow-init")


def test_compose_file_is_valid_against_the_compose_specification(compose_raw):
    schema = json.loads((SHARED / "schemas" / "compose-spec.json").read_text())
    validator = jsonschema.Draft7Validator(schema)

    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose_raw)
    ]

    assert errors == []


def test_the_schema_check_catches_a_broken_service(compose_raw):
    # Guards the test above against a schema that accepts anything.
    schema = json.loads((SHARED / "schemas" / "compose-spec.json").read_text())
    broken = json.loads(json.dumps(compose_raw))
    broken["services"]["airflow-worker"]["depends_on"]["airflow-init"]["condition"] = "when_ready"
    broken["services"]["redis"]["healthcheck"]["tset"] = ["CMD", "true"]

    assert len(list(jsonschema.Draft7Validator(schema).iter_errors(broken))) == 2


def test_stack_has_every_component(compose):
    assert set(compose["services"]) == {"postgres", "redis", *AIRFLOW_SERVICES}
    commands = {name: compose["services"][name]["command"] for name in LONG_RUNNING}
    assert commands == {
        "airflow-apiserver": "api-server",
        "airflow-scheduler": "scheduler",
        "airflow-dag-processor": "dag-processor",
        "airflow-triggerer": "triggerer",
        "airflow-worker": "celery worker",
    }


def test_every_airflow_service_is_built_from_the_common_anchor():
    # Compose the YAML without resolving it: each service must merge the very x-airflow-common node.
    root = yaml.compose(COMPOSE_FILE.read_text())
    top = {key.value: value for key, value in root.value}
    common = top["x-airflow-common"]
    services = {key.value: value for key, value in top["services"].value}
    for name in AIRFLOW_SERVICES:
        merged = [value for key, value in services[name].value if key.value == "<<"]
        assert merged and merged[0] is common, f"{name} does not merge *airflow-common"


def test_every_airflow_service_runs_the_same_image_user_and_settings(compose):
    common = compose["x-airflow-common"]
    assert common["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    for name in AIRFLOW_SERVICES:
        service = compose["services"][name]
        assert service["image"] == common["image"] == "conveyor-airflow:0.2.0", name
        assert service["build"] == common["build"], name
        assert service["user"] == "50000:0", name
        env = service["environment"]
        # Services may add variables, never change a common one.
        assert {key: env.get(key) for key in common["environment"]} == common["environment"], name


def test_celery_executor_with_broker_and_result_backend_on_the_stack_services(compose):
    services = compose["services"]
    env = compose["x-airflow-common"]["environment"]
    pg = services["postgres"]["environment"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"

    broker = urlsplit(env["AIRFLOW__CELERY__BROKER_URL"])
    assert (broker.scheme, broker.hostname, broker.port) == ("redis", "redis", 6379)
    assert 6379 in services["redis"]["expose"]

    for key, scheme in (
        ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "postgresql+psycopg2"),
        ("AIRFLOW__CELERY__RESULT_BACKEND", "db+postgresql"),
    ):
        url = urlsplit(env[key])
        assert url.scheme == scheme, key
        assert (url.hostname, url.port or 5432) == ("postgres", 5432), key
        assert (url.username, url.password) == (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"]), key
        assert url.path == f"/{pg['POSTGRES_DB']}", key


def test_same_jwt_secret_and_fernet_key_in_every_component(compose):
    from cryptography.fernet import Fernet

    secrets = {
        name: (
            compose["services"][name]["environment"]["AIRFLOW__API_AUTH__JWT_SECRET"],
            compose["services"][name]["environment"]["AIRFLOW__CORE__FERNET_KEY"],
        )
        for name in AIRFLOW_SERVICES
    }
    assert len(set(secrets.values())) == 1
    jwt_secret, fernet_key = next(iter(secrets.values()))
    assert len(jwt_secret) >= 16
    token = Fernet(fernet_key.encode()).encrypt(b"conveyor")  # a real key, not a placeholder
    assert Fernet(fernet_key.encode()).decrypt(token) == b"conveyor"


def test_secrets_come_from_the_environment_when_set(compose_raw):
    env = {"AIRFLOW__API_AUTH__JWT_SECRET": "from-dot-env", "AIRFLOW__CORE__FERNET_KEY": "k" * 43 + "="}
    resolved = compose_interpolate(compose_raw, env)
    for name in AIRFLOW_SERVICES:
        service_env = resolved["services"][name]["environment"]
        assert service_env["AIRFLOW__API_AUTH__JWT_SECRET"] == "from-dot-env", name
        assert service_env["AIRFLOW__CORE__FERNET_KEY"] == "k" * 43 + "=", name


def test_tasks_reach_the_execution_api_of_the_api_server(compose):
    env = compose["x-airflow-common"]["environment"]
    url = urlsplit(env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    api = compose["services"]["airflow-apiserver"]
    container_ports = {int(str(port).rsplit(":", 1)[-1]) for port in api["ports"]}
    assert url.hostname == "airflow-apiserver"
    assert url.port in container_ports
    assert url.path == "/execution/"
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "false"
    # The review steps' sensors defer (they read [operators] default_deferrable, off in Airflow's defaults).
    assert env["AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE"] == "true"


def test_project_folders_are_mounted_as_in_astro(compose):
    for name in AIRFLOW_SERVICES:
        volumes = compose["services"][name]["volumes"]
        for folder in ("dags", "plugins", "include"):
            assert f"./{folder}:/opt/airflow/{folder}" in volumes, (name, folder)
            assert (REPO / folder).is_dir(), folder
        assert "./airflow_settings.yaml:/opt/airflow/airflow_settings.yaml:ro" in volumes, name
        # Every container sees the same files: the storage base is a volume they all mount.
        assert "conveyor-files:/opt/airflow/conveyor-files" in volumes, name
    env = compose["x-airflow-common"]["environment"]
    # The installed package is the one that runs; nothing of it comes from a mounted folder.
    assert "PYTHONPATH" not in env
    assert env["AIRFLOW__CONVEYOR__STORAGE_BASE"] == "file:///opt/airflow/conveyor-files"  # with nothing set
    named = {v.split(":", 1)[0] for v in compose["x-airflow-common"]["volumes"] if not v.startswith(".")}
    assert named <= set(compose["volumes"])


def test_healthchecks_and_start_order(compose):
    services = compose["services"]
    for name in ("postgres", "redis", *LONG_RUNNING):
        test = services[name]["healthcheck"]["test"]
        assert test[0] in {"CMD", "CMD-SHELL"} and len(test) >= 2, name
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    assert "8974/health" in " ".join(services["airflow-scheduler"]["healthcheck"]["test"])
    assert "--job-type TriggererJob" in services["airflow-triggerer"]["healthcheck"]["test"][1]
    assert "--job-type DagProcessorJob" in services["airflow-dag-processor"]["healthcheck"]["test"][1]
    assert "inspect ping" in services["airflow-worker"]["healthcheck"]["test"][1]

    def conditions(name: str) -> dict[str, str]:
        return {dep: spec["condition"] for dep, spec in services[name]["depends_on"].items()}

    infra = {"postgres": "service_healthy", "redis": "service_healthy"}
    assert conditions("airflow-init") == infra
    for name in LONG_RUNNING:
        expected = {**infra, "airflow-init": "service_completed_successfully"}
        if name == "airflow-worker":
            expected["airflow-apiserver"] = "service_healthy"
        assert conditions(name) == expected, name
        assert services[name]["restart"] == "always", name
    assert services["airflow-init"]["restart"] == "no"


def _init_steps(compose: dict[str, Any]) -> list[str]:
    command = compose["services"]["airflow-init"]["command"]
    assert command[:2] == ["bash", "-c"]
    lines = [line.strip() for line in command[2].splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_init_migrates_creates_admin_loads_settings_then_upgrades_the_ledger(compose):
    steps = _init_steps(compose)
    assert steps[0] == "set -euo pipefail"
    order = [
        "airflow db migrate",
        "python -m conveyor.deploy.admin_user",
        # The exact command of the native quickstart, from the same working directory.
        "python -m conveyor.deploy.settings airflow_settings.yaml",
        'ledger_uri="$(python -m conveyor.deploy.ledger_db)"',
        'AIRFLOW_CONN_CONVEYOR_LEDGER="$ledger_uri" conveyor db upgrade',
    ]
    assert [step for step in steps if step in order] == order
    init = compose["services"]["airflow-init"]
    assert init["working_dir"] == "/opt/airflow"
    assert "./airflow_settings.yaml:/opt/airflow/airflow_settings.yaml:ro" in init["volumes"]


def test_the_admin_user_of_init_is_the_one_the_auth_manager_knows(compose):
    env = compose["services"]["airflow-init"]["environment"]
    users = dict(entry.split(":") for entry in env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].split(","))
    assert users == {env["_AIRFLOW_WWW_USER_USERNAME"]: "admin"}
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"].startswith("/opt/airflow/auth/")
    assert "airflow-auth:/opt/airflow/auth" in compose["services"]["airflow-apiserver"]["volumes"]


def test_ledger_connection_loaded_by_init_points_at_the_stack_postgres_conveyor_db(compose):
    from conveyor.deploy.settings_file import read_settings_file

    init_env = {k: str(v) for k, v in compose["services"]["airflow-init"]["environment"].items()}
    settings = read_settings_file(SETTINGS_FILE, env=init_env)
    ledger = {conn.conn_id: conn for conn in settings.connections}["conveyor_ledger"]
    pg = compose["services"]["postgres"]["environment"]

    assert ledger.conn_type == "postgres"
    assert (ledger.host, ledger.port, ledger.schema) == ("postgres", 5432, "conveyor")
    assert (ledger.login, ledger.password) == (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"])
    # The ledger has a database of its own, never Airflow's metadata DB.
    assert ledger.schema != pg["POSTGRES_DB"]


def test_compose_passes_every_settings_variable_through_to_init(compose):
    # A ${CONVEYOR_...} of airflow_settings.yaml that init does not receive could never be set.
    names = set(re.findall(r"\$\{(CONVEYOR_[A-Z0-9_]+)", SETTINGS_FILE.read_text()))
    assert names, "airflow_settings.yaml reads no CONVEYOR_* variables?"
    assert names <= set(compose["services"]["airflow-init"]["environment"])


# --- Dockerfile -------------------------------------------------------------------------------


def _dockerfile() -> list[str]:
    text = (REPO / "Dockerfile").read_text()
    # Join continuation lines, drop comments.
    text = re.sub(r"\\\n\s*", " ", text)
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_dockerfile_pins_airflow_and_installs_the_project_with_its_constraints():
    lines = _dockerfile()
    assert lines[0] == "FROM apache/airflow:3.3.2-python3.11"
    installs = [line for line in lines if line.startswith("RUN pip install")]
    assert len(installs) == 1
    install = installs[0]
    assert "-c constraints.txt" in install
    assert '"celery<5.7"' in install
    assert '"apache-airflow==3.3.2"' in install
    assert '".[celery,s3]"' in install
    # Not as root: the official image's rule.
    users = [line for line in lines if line.startswith("USER ")]
    assert users and users[-1] == "USER airflow"
    assert lines.index(users[-1]) < lines.index(install)


def test_celery_pin_matches_the_package_extra():
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "celery<5.7" in pyproject["project"]["optional-dependencies"]["celery"]


def _dockerignored(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context (a pattern on a folder covers it)."""
    from fnmatch import fnmatch

    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    parts = path.split("/")
    for pattern in patterns:
        for depth in range(len(parts)):
            if fnmatch("/".join(parts[: depth + 1]), pattern):
                return True
            if pattern.startswith("**/") and fnmatch(parts[depth], pattern[3:]):
                return True
    return False


@pytest.mark.parametrize(
    "ignored", [".venv", ".git", ".env", "tests", "src/airflow_provider_conveyor.egg-info", "src/conveyor/__pycache__"]
)
def test_dockerignore_keeps_local_state_out_of_the_image(ignored):
    assert _dockerignored(ignored)


def test_dockerfile_copies_only_files_the_build_context_has():
    sources: list[str] = []
    for line in _dockerfile():
        if line.startswith("COPY "):
            args = [arg for arg in line.split()[1:] if not arg.startswith("--")]
            sources += args[:-1]
    assert "constraints.txt" in sources and "src" in sources
    assert [source for source in sources if _dockerignored(source)] == [], "excluded by .dockerignore"
    # Anything missing here makes `docker compose build` fail.
    assert [source for source in sources if not (REPO / source).exists()] == []
