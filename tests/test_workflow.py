"""A workflow declaration: any chain of status names, the reserved side exits, the derived table."""

from __future__ import annotations

import pytest

from conveyor import ReviewField, Workflow
from conveyor.ledger.statuses import DEFAULT_CHAIN, RESERVED
from tests.support.workflows import INVOICES, SUPPLIER


def test_default_chain_walks_forward_and_never_back():
    flow = SUPPLIER
    for current, following in zip(DEFAULT_CHAIN, DEFAULT_CHAIN[1:], strict=False):
        assert flow.allows(current, following)
        assert not flow.allows(following, current)
    assert not flow.allows("published", "received")
    assert not flow.allows("received", "published")


def test_a_chain_of_its_own_names_gets_its_own_table():
    flow = Workflow("inspection_notes", chain=("received", "validated", "summarized", "published"),
                    ai_outputs=("summarized",))
    assert flow.allows("validated", "summarized") and flow.allows("summarized", "published")
    assert flow.allows("summarized", "pending_review") and flow.allows("pending_review", "summarized")
    assert not flow.allows("validated", "ai_processed")  # a status of another chain
    assert flow.stage_of("validated") == "model" and flow.stage_of("received") == "gate"
    assert flow.stage_of("summarized") == "publish" and flow.stage_of("published") is None


def test_invoice_chain_has_its_own_steps_and_gate_input():
    flow = INVOICES
    assert flow.gate_input == "extracted" and flow.gate_output == "validated"
    assert flow.allows("extracted", "quarantined")
    assert flow.done == "archived"
    assert flow.stage_map()["received"] == "model" and flow.stage_map()["classified"] == "approval"
    assert flow.stage_map()["pending_approval"] == "review"


@pytest.mark.parametrize("terminal", ["published", "rejected", "cancelled"])
def test_terminal_statuses_have_no_exit(terminal):
    assert not any(f == terminal for f, _ in SUPPLIER.transitions)


def test_review_exits_resume_the_chain_or_reject():
    flow = SUPPLIER
    assert flow.allows("ai_processed", "pending_review")
    assert flow.allows("pending_review", "approved") and flow.allows("pending_approval", "approved")
    assert flow.allows("pending_review", "rejected")
    assert flow.allows("quarantined", "validated") and flow.allows("quarantined", "received")
    assert not flow.allows("quarantined", "published")  # a decision alone never finishes an item


@pytest.mark.parametrize("reserved", sorted(RESERVED))
def test_a_chain_cannot_use_a_reserved_side_exit(reserved):
    with pytest.raises(ValueError, match="reserved side exit"):
        Workflow("broken", chain=("received", reserved, "done"))


@pytest.mark.parametrize(
    ("chain", "message"),
    [
        (("received",), "at least two"),
        (("received", "Validated"), "invalid status name"),
        (("received", "validated", "received"), "each status once"),
    ],
)
def test_malformed_chains_are_refused(chain, message):
    with pytest.raises(ValueError, match=message):
        Workflow("broken", chain=chain)


@pytest.mark.parametrize("name", ["", "a:b", "Has Space"])
def test_invalid_workflow_names_are_refused(name):
    with pytest.raises(ValueError, match="invalid workflow name"):
        Workflow(name)


def test_equal_declarations_share_a_digest_and_review_fields_are_normalised():
    one = Workflow("w", review_card=("supplier_name", "confidence"), thresholds={"exception_rate_bound": 0.1})
    two = Workflow("w", review_card=(ReviewField("supplier_name"), ReviewField("confidence", kind="percent")),
                   thresholds={"exception_rate_bound": 0.1})
    assert one == two and one.digest == two.digest
    assert Workflow("w", chain=("received", "done")) != one
    assert Workflow.from_definition(one.definition(), version=3) == one
    with pytest.raises(ValueError, match="kind must be one of"):
        ReviewField("amount", kind="currency")
