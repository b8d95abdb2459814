"""The transition tables: one place, derived from each workflow's chain."""

from __future__ import annotations

import pytest
from conveyor.ledger.errors import UnknownWorkflow
from conveyor.ledger.statuses import (
    DEFAULT_CHAIN,
    INVOICE_CHAIN,
    Status,
    Workflow,
    get_workflow,
    parse_status,
)


def test_default_chain_walks_forward_and_never_back():
    flow = get_workflow("supplier_exceptions")
    for current, following in zip(DEFAULT_CHAIN, DEFAULT_CHAIN[1:], strict=False):
        assert flow.allows(current, following)
        assert not flow.allows(following, current)
    assert not flow.allows("published", "received")
    assert not flow.allows("received", "published")


def test_invoice_chain_has_its_own_steps_and_gate_input():
    flow = get_workflow("invoice_processing")
    assert flow.chain == INVOICE_CHAIN
    assert flow.gate_input == Status.EXTRACTED
    assert flow.allows("extracted", "quarantined")
    assert not flow.allows("received", "quarantined")
    assert flow.done == Status.ARCHIVED
    # A status of another chain is not part of this one.
    assert not flow.allows("validated", "ai_processed")


@pytest.mark.parametrize("terminal", ["published", "rejected", "cancelled"])
def test_terminal_statuses_have_no_exit(terminal):
    flow = get_workflow("supplier_exceptions")
    assert not any(f == terminal for f, _ in flow.transitions)


def test_review_exits_resume_the_chain_or_reject():
    flow = get_workflow("supplier_exceptions")
    assert flow.allows("ai_processed", "pending_review")
    assert flow.allows("pending_review", "approved")
    assert flow.allows("pending_review", "rejected")
    assert flow.allows("quarantined", "validated")
    assert flow.allows("quarantined", "received")
    assert not flow.allows("quarantined", "published")


def test_an_undeclared_workflow_gets_the_common_chain():
    assert get_workflow("inspection_notes").chain == DEFAULT_CHAIN


@pytest.mark.parametrize("name", ["", "a:b"])
def test_invalid_workflow_names_are_refused(name):
    with pytest.raises(UnknownWorkflow):
        get_workflow(name)


def test_a_chain_must_start_at_received_and_pass_validated():
    with pytest.raises(ValueError, match="starts at 'received'"):
        Workflow("broken", chain=(Status.VALIDATED, Status.PUBLISHED))
    with pytest.raises(ValueError, match="each status once"):
        Workflow("loop", chain=(Status.RECEIVED, Status.VALIDATED, Status.RECEIVED))


def test_unknown_status_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown status 'done'; valid statuses: received"):
        parse_status("done")
