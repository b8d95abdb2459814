"""inspection_notes end to end: the third bundled workflow, built on the public API alone."""

from __future__ import annotations

import ast
import csv
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

import conveyor
from conveyor import storage_path
from conveyor.quickstart import sample_feeds
from tests.dags.conftest import task_states

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "include" / "data" / "inspection_notes" / "notes.csv"
WF = "inspection_notes"
FILES = [REPO / "dags" / "inspection_notes.py", REPO / "dags" / "conveyor_examples" / "inspection_notes.py"]


@pytest.fixture
def todays_notes(tmp_path) -> Path:
    name, text = sample_feeds.csv_delivery(SAMPLE, key="inspection_id", date_column="inspected_on", delivery=1,
                                           today=datetime.now(UTC).date())
    (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path / name


def test_the_workflow_and_its_helpers_stay_small_and_use_only_the_public_api():
    assert sum(len(f.read_text().splitlines()) for f in FILES) <= 120
    for path in FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("conveyor"):
                if node.module == "conveyor":
                    assert {a.name for a in node.names} <= set(conveyor.__all__), path
                else:
                    assert node.module.startswith("conveyor_examples"), (path, node.module)


def test_notes_are_summarized_reviewed_and_published_once(runner, ledger, todays_notes, mailbox, tmp_path,
                                                          monkeypatch):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    when = datetime.now(UTC).replace(microsecond=0)

    run, reviewer = runner.run(WF, {"extract_path": str(todays_notes)}, when=when)

    assert run.state == "success", task_states(run)
    counts = ledger.count_by_status(workflow=WF, run_id=run.run_id)
    assert set(counts) == {"published", "rejected"}, counts
    assert counts["rejected"] == 3  # the planted bad rows: quarantined by the gate, rejected by a person
    [outbox] = ledger.effects("publish_report").values()
    report = storage_path(outbox["result"]["files"][0]).read_text()
    assert report.index("## High risk") < report.index("## Medium risk") < report.index("## Low risk")
    published = ledger.items(workflow=WF, run_id=run.run_id, status="published", limit=None)
    assert all(i.ai_result["summary"] in report for i in published)
    assert ledger.workflow(WF).chain == ("received", "validated", "summarized", "published")
    history = {i.item_id: len(ledger.history(i.item_id)) for i in ledger.items(workflow=WF, limit=None)}

    again, _ = runner.run(WF, {"extract_path": str(todays_notes)}, when=when)  # cleared and re-run

    assert again.state == "success" and again.run_id == run.run_id
    assert len(ledger.effects("publish_report")) == 1
    assert {i.item_id: len(ledger.history(i.item_id)) for i in ledger.items(workflow=WF, limit=None)} == history
    assert mailbox.subjects == []


def _rewritten(path: Path, target: Path, *, rename: dict[str, str] | None = None, rows: int | None = None) -> Path:
    reader = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))
    fields = [(rename or {}).get(f, f) for f in reader.fieldnames or []]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(fields)
    for n, row in enumerate(reader):
        if rows is not None and n >= rows:
            break
        writer.writerow(row.values())
    target.write_text(out.getvalue(), encoding="utf-8")
    return target


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rename": {"site_id": "location_id"}}, "column 'site_id' missing; found 'location_id'"),
        ({"rows": 0}, "no data rows"),
    ],
    ids=["renamed_column", "empty_file"],
)
def test_a_broken_feed_fails_at_the_gate(runner, ledger, todays_notes, mailbox, tmp_path, monkeypatch, change,
                                         message):
    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    feed = _rewritten(todays_notes, tmp_path / "broken.csv", **change)

    run, _ = runner.run(WF, {"extract_path": str(feed)}, people=False)

    states = task_states(run)
    assert run.state == "failed" and states["validate"] == "failed", states
    assert states["publish"] == "upstream_failed"
    assert message in ledger.get_batch(WF, run.run_id, "validate")["reason"]
    assert ledger.count_by_status(workflow=WF) == {}
    assert any("step 'validate' failed" in s for s in mailbox.subjects)


def test_a_zero_byte_feed_is_rejected_and_recorded_by_the_gate_and_the_alert_says_where(
    runner, ledger, mailbox, tmp_path, monkeypatch
):
    import html
    import json
    import os
    import subprocess
    import sys

    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path / "home"))
    feed = tmp_path / "notes.csv"
    feed.write_bytes(b"")

    run, _ = runner.run(WF, {"extract_path": str(feed)}, people=False)

    states = task_states(run)
    assert run.state == "failed" and states["extract"] == "success" and states["validate"] == "failed", states
    [delivery] = ledger.deliveries(WF, run_id=run.run_id)
    assert (delivery.outcome, delivery.step, delivery.kind) == ("empty", "validate", "empty")
    assert "input file is empty (0 bytes)" in (delivery.reason or "")
    [body] = [html.unescape(b) for s, b in zip(mailbox.subjects, mailbox.bodies, strict=True)
              if "step 'validate' failed" in s]  # fmt: skip
    assert f"conveyor batches --workflow {WF} --run '{run.run_id}'" in body
    assert "conveyor items --workflow" not in body

    cli = subprocess.run([str(Path(sys.executable).with_name("conveyor")), "batches", "--workflow", WF, "--run",
                          run.run_id, "--json"], capture_output=True, text=True, env=dict(os.environ), timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert [d["outcome"] for d in json.loads(cli.stdout)] == ["empty"]
