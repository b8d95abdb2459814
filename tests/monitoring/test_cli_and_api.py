"""``conveyor metrics`` and the plugin routes serve the same numbers as the metrics module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from conveyor.ledger import Ledger
from conveyor.monitoring import metrics
from conveyor.monitoring.api import get_ledger, router
from conveyor.monitoring.snapshot import HealthSnapshot
from tests.monitoring.conftest import MARKUP_SOURCE

VENV_BIN = Path(sys.executable).parent

# Runs the CLI in a fresh interpreter and reports whether Airflow (or FastAPI) got imported on the way.
_PROBE = (
    "import sys; from conveyor.cli.main import main; rc = main(sys.argv[1:]); "
    "heavy = sorted(m for m in ('airflow', 'fastapi', 'pandas') if m in sys.modules); "
    "print('IMPORTED=' + ','.join(heavy), file=sys.stderr); sys.exit(rc)"
)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )


def test_cli_json_matches_the_metrics_without_importing_airflow(recent):
    as_of = recent.as_of.isoformat()
    done = _cli("metrics", "--workflow", "wf_queue", "--as-of", as_of, "--json")

    assert done.returncode == 0, done.stderr
    assert "IMPORTED=\n" in done.stderr or done.stderr.rstrip().endswith("IMPORTED=")
    data = json.loads(done.stdout)
    [health] = data["workflows"]
    expected = metrics.measure(recent.ledger, "wf_queue", as_of=recent.as_of)
    assert HealthSnapshot.from_xcom(health) == expected  # every number, read back typed
    assert health["runs"] == metrics.run_progress(recent.ledger, "wf_queue", as_of=recent.as_of, limit=5)
    assert {a["rule"] for a in data["open_alerts"]} >= {"cycle_time"}


def test_cli_text_for_people(recent):
    done = subprocess.run(
        [str(VENV_BIN / "conveyor"), "metrics", "--as-of", recent.as_of.isoformat()],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("supplier_exceptions  (last 24 h") < out.index("wf_queue  (last 24 h")
    assert "STAGE" in out and "review" in out and "DONE" in out
    assert "open alerts:" in out and "bottleneck: review" in out


def test_cli_shows_the_progress_of_one_run(recent):
    done = _cli("metrics", "--workflow", "wf_queue", "--run", "manual__markup", "--json")
    assert done.returncode == 0, done.stderr
    [health] = json.loads(done.stdout)["workflows"]
    assert [(r["run_id"], r["received"], r["done"], r["in_review"]) for r in health["runs"]] == [
        ("manual__markup", 6, 0, 6)
    ]


def test_cli_rejects_a_malformed_or_undeclared_workflow(recent):
    done = _cli("metrics", "--workflow", "bad:name")
    assert done.returncode == 3 and "invalid workflow name" in done.stderr
    done = _cli("metrics", "--workflow", "never_declared")
    assert done.returncode == 3 and "unknown workflow 'never_declared'" in done.stderr


@pytest.fixture
def client(recent) -> TestClient:
    app = FastAPI()
    app.include_router(router)
    return TestClient(app)


def test_api_serves_the_same_numbers(client, recent):
    as_of = recent.as_of.isoformat()
    everything = client.get("/api/metrics", params={"as_of": as_of}).json()
    assert [w["workflow"] for w in everything["workflows"]] == ["supplier_exceptions", "wf_queue"]
    expected = metrics.measure(recent.ledger, "supplier_exceptions", as_of=recent.as_of)
    assert everything["workflows"][0] == expected.as_xcom()

    one = client.get("/api/metrics/wf_queue", params={"as_of": as_of, "runs": 3}).json()
    assert len(one["runs"]) == 3 and one["runs"][0]["received"] > 0
    assert {a["rule"] for a in one["open_alerts"]} >= {"cycle_time"}
    assert one["exceptions"]["sources"][0]["source"] == MARKUP_SOURCE

    series = client.get(
        "/api/metrics/wf_queue/series", params={"as_of": as_of, "days": 2, "bucket_hours": 6}
    ).json()
    assert len(series["points"]) == 8 and series["points"][-1]["end"] == recent.as_of.isoformat()
    assert sum(p["throughput"] for p in series["points"][-4:]) == one["throughput"]["current"]

    runs = client.get("/api/metrics/wf_queue/runs", params={"run_id": "manual__markup"}).json()
    assert [(r["run_id"], r["received"], r["in_review"]) for r in runs["runs"]] == [("manual__markup", 6, 6)]

    alerts = client.get("/api/alerts", params={"workflow": "wf_queue"}).json()
    assert alerts["open"] and all(e["state"] == "pending" for e in alerts["recent"])


def test_api_refuses_bad_input_and_reports_an_unreachable_ledger(client):
    assert client.get("/api/metrics/bad:name").status_code == 404
    for path in ("", "/series", "/runs"):  # a well-formed name nobody declared: 404, not zeros
        unknown = client.get(f"/api/metrics/never_declared{path}")
        assert unknown.status_code == 404 and "unknown workflow" in unknown.json()["detail"], path
    assert (
        client.get("/api/metrics/wf_queue/series", params={"days": 90, "bucket_hours": 0.25}).status_code
        == 422
    )
    assert client.get("/api/metrics", params={"window_hours": 0}).status_code == 422

    client.app.dependency_overrides[get_ledger] = lambda: Ledger("postgresql://postgres@127.0.0.1:1/nowhere")
    answer = client.get("/api/metrics/wf_queue")
    assert answer.status_code == 503 and "cannot reach the ledger" in answer.json()["detail"]


def test_page_and_script_are_served_with_a_strict_policy(client):
    page = client.get("/health")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<script src="health/static/health.js"></script>' in page.text
    script = client.get("/health/static/health.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    for sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script.text, sink  # data is written as text only


def test_the_conveyor_app_guards_these_routes_with_airflow_auth():
    from conveyor.review.webapp import create_app

    app = create_app(["conveyor.monitoring.api:create_router"])
    paths = {route.path for route in app.routes}
    assert {"/api/metrics", "/api/metrics/{workflow}/series", "/health"} <= paths
    assert TestClient(app).get("/api/metrics").status_code == 401
