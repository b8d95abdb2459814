"""The wheel installs into someone else's Airflow: built here, installed into clean virtual environments
outside the checkout, on the lowest and the highest versions pyproject.toml claims, and smoke-tested
in a user's project of the Astro CLI layout (requirements.txt naming the package, an empty plugins/)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests.support import postgres

REPO = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).with_name("uv")
pytestmark = pytest.mark.packaging


def lowest_requirements() -> list[str]:
    """Every direct dependency pinned to the lower bound pyproject.toml declares."""
    pins = []
    for spec in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]:
        name, extras = re.match(r"([A-Za-z0-9_.-]+)(\[[^\]]+\])?", spec).groups()  # type: ignore[union-attr]
        bound = re.search(r">=\s*([0-9][^,;\s]*)", spec)
        assert bound, f"{spec}: every dependency declares a lower bound"
        pins.append(f"{name}{extras or ''}=={bound.group(1)}")
    return pins


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    [path] = out.glob("airflow_provider_conveyor-*.whl")
    return path


def test_the_wheel_carries_its_own_files_and_no_users_files(wheel):
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith("ledger/migrations/0008_workflow_declarations.sql") for n in names)
    assert any(n.endswith("review/static/review.js") for n in names)
    assert not any(n.startswith(("dags/", "include/", "tests/")) or "conveyor_examples" in n for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[apache_airflow_provider]" in text and "[airflow.plugins]" in text


def project_like_astro(root: Path, wheel: Path) -> Path:
    """A user's project: dags/, include/, an empty plugins/, requirements.txt naming the package."""
    project = root / "project"
    shutil.copytree(REPO / "dags", project / "dags", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "include", project / "include", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "plugins").mkdir()
    (project / "requirements.txt").write_text(f"airflow-provider-conveyor @ {wheel.as_uri()}\n")
    return project


@pytest.mark.timeout(900)  # an install, then a dags test given 8 minutes on a loaded CI machine
@pytest.mark.parametrize("versions", ["lowest", "highest"])
def test_the_wheel_runs_a_bundled_workflow_in_a_clean_environment(wheel, tmp_path, versions, record_property):
    project = project_like_astro(tmp_path, wheel)
    venv = tmp_path / "venv"
    subprocess.run([str(UV), "venv", "-q", "-p", sys.executable, str(venv)], check=True, timeout=120)
    install = [str(UV), "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
               "-r", str(project / "requirements.txt")]
    if versions == "lowest":
        (tmp_path / "lowest.txt").write_text("\n".join(lowest_requirements()) + "\n")
        install += ["-r", str(tmp_path / "lowest.txt")]
    else:
        install += ["-c", str(REPO / "constraints.txt")]
    installing = time.monotonic()
    done = subprocess.run(install, capture_output=True, text=True, timeout=900)
    record_property("install_seconds", round(time.monotonic() - installing, 1))
    assert done.returncode == 0, done.stderr[-3000:]
    freeze = subprocess.run([str(UV), "pip", "freeze", "--python", str(venv / "bin" / "python")],
                            capture_output=True, text=True, check=True).stdout
    airflow = re.search(r"^apache-airflow==(\S+)$", freeze, re.M).group(1)  # type: ignore[union-attr]
    assert airflow == ("3.2.0" if versions == "lowest" else "3.3.2")
    assert str(REPO) not in freeze  # installed from the wheel, nothing from this checkout

    dbname = f"conveyor_wheel_{versions}_{abs(hash(str(tmp_path))) % 10**6}"
    postgres.create_database(dbname)
    try:
        smoke = subprocess.run(
            [str(venv / "bin" / "python"), str(REPO / "tests" / "packaging" / "smoke.py"), str(project),
             postgres.dsn_for(dbname)],
            capture_output=True, text=True, timeout=720, cwd=tmp_path,
        )
    finally:
        postgres.drop_database(dbname)
    assert smoke.stdout.strip(), smoke.stderr[-3000:]
    report = json.loads(smoke.stdout.strip().splitlines()[-1])
    record_property("smoke_seconds", json.dumps(report["seen"].get("seconds")))  # in --junitxml's report
    failed = [name for name, ok in report["checks"].items() if not ok]
    log = (project / "dags-test.log").read_text(errors="replace")[-6000:] if failed else ""
    # what the smoke saw first, so a truncated message still says why (the log's tail after it)
    assert failed == [], f"{failed}: {json.dumps(report['seen'])}\n{log}"
    assert report["seen"]["items"].get("rejected", 0) >= 3  # the planted bad rows, decided by a person
