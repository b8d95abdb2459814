"""Every bundled DAG imports on Airflow 3.3, parses fast, with no heavy import at parse time,
and every task declares its recovery strategy (``conveyor lint``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAG_FILES = sorted((REPO / "dags").glob("*.py"))
HEAVY = ("great_expectations", "pandas", "sklearn", "pydantic_ai", "openai", "pyarrow", "psycopg")
EXPECTED_DAGS = {"supplier_exceptions", "invoice_processing", "inspection_notes", "workflow_health"}

# Imports a DAG file in a fresh interpreter after Airflow itself is loaded, and reports the
# seconds the file took and which heavy modules it pulled in. The seconds are the interpreter's
# CPU time: what parsing costs the dag-processor, and steady on a machine busy with other work
# (wall time measured 0.72 s for a 0.3 s parse with the suite's parallel workers running).
PROBE = """
import importlib.util, json, sys, time
import airflow.sdk  # Airflow's own import cost is not the DAG's
sys.path.append(sys.argv[1].rsplit("/", 1)[0])  # as Airflow's DAG bundle does: the DAGs' own modules import
before = set(sys.modules)
started = time.process_time()
spec = importlib.util.spec_from_file_location("dag_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
seconds = time.process_time() - started
new = set(sys.modules) - before
heavy = sorted({m.split(".")[0] for m in new if m.split(".")[0] in HEAVY})
print(json.dumps({"seconds": seconds, "heavy": heavy}))
""".replace("HEAVY", repr(HEAVY))


def test_the_bundled_dags_are_there():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    assert EXPECTED_DAGS <= set(bag.dag_ids)


@pytest.mark.parametrize("dag_file", DAG_FILES, ids=[p.name for p in DAG_FILES])
def test_dag_file_parses_fast_without_heavy_imports(dag_file: Path):
    best = None
    for _ in range(2):  # the first import may compile bytecode
        done = subprocess.run([sys.executable, "-c", PROBE, str(dag_file)], capture_output=True, text=True,
                              timeout=120, env=dict(os.environ))
        assert done.returncode == 0, done.stderr[-2000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        best = result if best is None or result["seconds"] < best["seconds"] else best
    assert best["heavy"] == [], f"{dag_file.name} imports {best['heavy']} at parse time"
    assert best["seconds"] <= 0.5, f"{dag_file.name} took {best['seconds']:.2f} s to parse"


def test_every_task_declares_its_recovery_strategy():
    conveyor = str(Path(sys.executable).with_name("conveyor"))
    done = subprocess.run([conveyor, "lint", str(REPO / "dags"), "--json"], capture_output=True, text=True,
                          timeout=300)
    report = json.loads(done.stdout)
    assert report["findings"] == [], report["findings"]
    assert report["tasks_checked"] >= 15
    assert done.returncode == 0
