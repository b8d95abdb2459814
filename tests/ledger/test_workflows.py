"""Workflow declarations stored in the ledger: versioned, read without the DAG, items keep theirs."""

from __future__ import annotations

import pytest

from conveyor import Workflow
from conveyor.ledger import IllegalTransition, Ledger, NewItem, UnknownWorkflow
from conveyor.ledger import workflows as declarations


def test_declaring_twice_is_one_version_and_a_change_is_the_next(ledger):
    first = ledger.declare(Workflow("notes", chain=("received", "validated", "done")))
    again = ledger.declare(Workflow("notes", chain=("received", "validated", "done")))
    changed = ledger.declare(Workflow("notes", chain=("received", "validated", "checked", "done")))
    assert (first.version, again.version, changed.version) == (1, 1, 2)
    assert list(ledger.workflow_versions("notes")) == [1, 2]


def test_another_process_reads_the_declaration_from_the_ledger(ledger, ledger_dsn):
    ledger.declare(Workflow("notes", chain=("received", "validated", "done"), source_field="site_id"))
    declarations.forget()  # as a CLI, API server or triggerer that never imported the DAG
    flow = Ledger(ledger_dsn).workflow("notes")
    assert flow.chain == ("received", "validated", "done") and flow.source_field == "site_id"
    assert "notes" in Ledger(ledger_dsn).workflow_names()


def test_an_undeclared_workflow_is_a_clear_error_never_a_default_chain(ledger):
    with pytest.raises(UnknownWorkflow, match="unknown workflow 'nobody_declared'.*conveyor.Workflow"):
        ledger.workflow("nobody_declared")
    with pytest.raises(UnknownWorkflow):
        ledger.receive("nobody_declared", "run-1", [NewItem("k", {"a": 1})], actor="t")


def test_items_in_flight_keep_the_chain_they_were_received_under(ledger):
    old = Workflow("notes", chain=("received", "validated", "done"))
    ledger.receive(old, "run-1", [NewItem("k1", {"a": 1})], actor="t")
    new = Workflow("notes", chain=("received", "validated", "checked", "done"))
    ledger.receive(new, "run-2", [NewItem("k2", {"a": 2})], actor="t")
    assert ledger.get("notes:k1").workflow_version == 1 and ledger.get("notes:k2").workflow_version == 2
    ledger.transition("notes", ["notes:k1", "notes:k2"], to_status="validated", from_status="received", actor="t")
    # validated -> checked exists only in version 2: the version-1 item is refused, nothing moves.
    with pytest.raises(IllegalTransition, match="notes:k1"):
        ledger.transition(new, ["notes:k1", "notes:k2"], to_status="checked", from_status="validated", actor="t")
    assert ledger.get("notes:k2").status == "validated"
    moved = ledger.transition(new, ["notes:k2"], to_status="checked", from_status="validated", actor="t")
    assert moved.moved == ["notes:k2"]
