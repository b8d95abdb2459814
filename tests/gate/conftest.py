"""Helpers of the gate tests: the sample data, a fixed run date, and a one-call gate run."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "include" / "data"
SUPPLIER = DATA / "supplier_exceptions"
MALFORMED = SUPPLIER / "malformed"
INVOICES = DATA / "invoices"
#: The sample extract's newest exception is dated 2026-11-27; the tests run "on" 2026-11-30.
AS_OF = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)


def run_gate(ledger: Any, source: str | Path | None = None, *, run_id: str = "run-1", **settings: Any):
    """Gate ``source`` for ``run_id`` with the supplier suite (settings override), return the summary."""
    from conveyor.gate.config import GateConfig
    from conveyor.gate.runner import open_gate

    params: dict[str, Any] = {
        "workflow": "supplier_exceptions",
        "suite": "supplier_exceptions",
        "step": "gate",
        "as_of": AS_OF,
    }
    params.update(settings)
    config = GateConfig(run_id=run_id, source=None if source is None else str(source), **params)
    return open_gate(config, ledger, actor="tests.gate#1").run()


@pytest.fixture(scope="session")
def generator() -> ModuleType:
    """include/data/generate.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("conveyor_sample_data", DATA / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def transitions_count(ledger: Any) -> int:
    with ledger.connect() as conn:
        return conn.execute("SELECT count(*) FROM conveyor.transitions").fetchone()[0]


def snapshot(ledger: Any) -> dict[str, Any]:
    """Everything the gate writes, to prove a re-run changes nothing."""
    with ledger.connect() as conn:
        return {
            "items": conn.execute(
                "SELECT item_id, status, input_hash, updated_at, reason FROM conveyor.items ORDER BY item_id"
            ).fetchall(),
            "transitions": conn.execute("SELECT count(*), max(id) FROM conveyor.transitions").fetchone(),
            "batches": conn.execute(
                "SELECT workflow, run_id, step, status, input_hash, updated_at"
                " FROM conveyor.batches ORDER BY 1, 2, 3"
            ).fetchall(),
            "results": conn.execute(
                "SELECT row_key, outcome, created_at FROM conveyor.gate_results ORDER BY row_key"
            ).fetchall(),
        }
