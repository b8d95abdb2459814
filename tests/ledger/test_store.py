"""The ledger against a real PostgreSQL: receive, guarded transitions, audit, idempotency keys."""

from __future__ import annotations

import pytest

from conveyor.ledger import IllegalTransition, ItemUpdate, LedgerUnavailable, NewItem, Route, UnknownItem
from conveyor.ledger.hashing import input_hash

WF = "supplier_exceptions"


def receive(ledger, keys, run="run-1", **payload_extra):
    return ledger.receive(WF, run, [NewItem(k, {"key": k, **payload_extra}) for k in keys], actor="test.gate#1")


def test_receive_writes_items_and_audit_rows(ledger):
    result = receive(ledger, ["PO-1", "PO-2"])

    assert result.inserted == [f"{WF}:PO-1", f"{WF}:PO-2"]
    item = ledger.get(f"{WF}:PO-1")
    assert item.status == "received"
    assert item.run_id == "run-1"
    assert item.payload == {"key": "PO-1"}
    assert item.input_hash == input_hash({"key": "PO-1"})
    assert "received" in item.stage_times
    [record] = ledger.history(f"{WF}:PO-1")
    assert (record.from_status, record.to_status, record.actor) == (None, "received", "test.gate#1")


def test_receive_is_idempotent_and_reports_conflicts_and_duplicates(ledger):
    receive(ledger, ["PO-1", "PO-2"])
    again = ledger.receive(
        WF,
        "run-1",
        [NewItem("PO-1", {"key": "PO-1"}), NewItem("PO-2", {"key": "changed"}), NewItem("PO-2", {"x": 1})],
        actor="test.gate#2",
    )

    assert again.inserted == []
    assert again.unchanged == [f"{WF}:PO-1"]
    assert again.conflicts == {f"{WF}:PO-2": ("run-1", "received")}
    assert again.duplicates == [f"{WF}:PO-2"]
    # Nothing was overwritten and no audit row was added.
    assert ledger.get(f"{WF}:PO-2").payload == {"key": "PO-2"}
    assert len(ledger.history(f"{WF}:PO-2")) == 1


def test_payload_with_unicode_quotes_and_a_megabyte_of_text_round_trips(ledger):
    text = "Lieferung verspätet — «Zoll» 'quoted' \"double\" \\ backslash \t tab 日本語 😀 " * 1
    big = "x" * (1024 * 1024)
    payload = {"notes": text, "big": big, "nested": {"list": [1, 2.5, None, True]}, "sql": "'; DROP TABLE x; --"}
    ledger.receive(WF, "run-1", [NewItem("PO-ü'1", payload)], actor="t")

    item = ledger.get(f"{WF}:PO-ü'1")
    assert item.payload == payload
    assert item.input_hash == input_hash(payload)


def test_keys_needing_copy_escapes_among_plain_ones_round_trip(ledger):
    # COPY's text format escapes a chunk's values only when one of them needs it.
    keys = ["PO-1", "PO\\2", "PO\t3", "PO\n4", "PO\r5", "PO-6"]
    routes = {f"{WF}:{k}": Route("validated", reason="passed") for k in keys[::2]}
    result = ledger.receive(WF, "run-1", [NewItem(k, {"key": k}) for k in keys], actor="t", routes=routes)

    assert result.inserted == [f"{WF}:{k}" for k in keys]
    for key in keys:
        item = ledger.get(f"{WF}:{key}")
        assert (item.business_key, item.payload, item.input_hash) == (key, {"key": key}, input_hash({"key": key}))
        moves = [(r.from_status, r.to_status) for r in ledger.history(item.item_id)]
        routed = [("received", "validated")] if item.item_id in routes else []
        assert moves == [(None, "received"), *routed]


def test_routed_items_of_a_chunk_with_conflicts_keep_their_routes_detail(ledger):
    # A re-sent delivery: PO-1 is in the ledger, so the chunk goes through the staging path and its
    # new items make their routed move as a second statement, with the same audit detail.
    receive(ledger, ["PO-1"])
    detail = {"gate": "validate_extract", "suite": "supplier_extract", "field": "payload"}
    routes = {
        f"{WF}:{k}": Route("quarantined", reason="amount is negative", last_error="amount -5", detail=detail)
        for k in ("PO-1", "PO-2")
    }
    result = ledger.receive(
        WF, "run-1", [NewItem("PO-1", {"key": "PO-1"}), NewItem("PO-2", {"key": "PO-2"})], actor="gate", routes=routes
    )

    assert (result.unchanged, result.inserted) == ([f"{WF}:PO-1"], [f"{WF}:PO-2"])
    assert ledger.get(f"{WF}:PO-1").status == "received"  # not moved: it was not received now
    item = ledger.get(f"{WF}:PO-2")
    assert (item.status, item.reason, item.last_error) == ("quarantined", "amount is negative", "amount -5")
    move = ledger.history(item.item_id)[-1]
    assert (move.from_status, move.to_status, move.detail) == ("received", "quarantined", detail)


def test_transition_moves_items_with_data_and_audit_in_one_step(ledger):
    receive(ledger, ["PO-1", "PO-2"])
    ledger.transition(WF, [f"{WF}:PO-1", f"{WF}:PO-2"], to_status="validated", from_status="received", actor="gate#1")

    result = ledger.transition(
        WF,
        {
            f"{WF}:PO-1": ItemUpdate(reason="confident", ai_result={"category": "late_delivery"}, confidence=0.93),
            f"{WF}:PO-2": ItemUpdate(reason="low confidence 0.41", confidence=0.41, review_target="ai_processed"),
        },
        to_status="ai_processed",
        from_status="validated",
        actor="ai#1",
    )
    assert sorted(result.moved) == [f"{WF}:PO-1", f"{WF}:PO-2"]

    item = ledger.get(f"{WF}:PO-1")
    assert item.status == "ai_processed"
    assert item.ai_result == {"category": "late_delivery"}
    assert item.confidence == pytest.approx(0.93)
    assert item.reason == "confident"
    assert set(item.stage_times) == {"received", "validated", "ai_processed"}
    audit = ledger.history(f"{WF}:PO-2")
    assert [(r.from_status, r.to_status) for r in audit] == [
        (None, "received"),
        ("received", "validated"),
        ("validated", "ai_processed"),
    ]
    assert audit[-1].reason == "low confidence 0.41"
    assert audit[-1].actor == "ai#1"


def test_items_in_another_status_are_not_moved_and_reported(ledger):
    receive(ledger, ["PO-1", "PO-2"])
    ledger.transition(WF, [f"{WF}:PO-1"], to_status="validated", from_status="received", actor="a")

    result = ledger.transition(
        WF, [f"{WF}:PO-1", f"{WF}:PO-2", f"{WF}:missing"], to_status="validated", from_status="received", actor="b"
    )

    assert result.moved == [f"{WF}:PO-2"]
    assert result.not_moved == {f"{WF}:PO-1": "validated", f"{WF}:missing": None}
    assert len(ledger.history(f"{WF}:PO-1")) == 2


def test_illegal_transition_names_item_status_and_target_and_changes_nothing(ledger):
    receive(ledger, ["PO-1", "PO-2"])
    for target in ["validated", "ai_processed", "approved", "published"]:
        ledger.transition(WF, [f"{WF}:PO-1"], to_status=target, actor="t")

    with pytest.raises(IllegalTransition) as raised:
        ledger.transition(WF, [f"{WF}:PO-2", f"{WF}:PO-1"], to_status="received", actor="t")

    message = str(raised.value)
    assert f"item '{WF}:PO-1' is 'published'" in message
    assert "cannot move to 'received'" in message
    assert ledger.get(f"{WF}:PO-1").status == "published"
    assert ledger.get(f"{WF}:PO-2").status == "received"
    assert len(ledger.history(f"{WF}:PO-2")) == 1


def test_illegal_transition_with_an_explicit_from_status_is_refused_before_writing(ledger):
    receive(ledger, ["PO-1"])
    with pytest.raises(
        IllegalTransition, match="item 'supplier_exceptions:PO-1' is 'received'; cannot move to 'published'"
    ):
        ledger.transition(WF, [f"{WF}:PO-1"], to_status="published", from_status="received", actor="t")
    assert ledger.get(f"{WF}:PO-1").status == "received"


def test_an_item_of_another_workflow_is_not_moved(ledger):
    receive(ledger, ["PO-1"])
    result = ledger.transition(
        "invoice_processing", [f"{WF}:PO-1"], to_status="extracted", from_status="received", actor="t"
    )
    assert result.moved == []
    assert ledger.get(f"{WF}:PO-1").status == "received"


def test_thousands_of_items_move_in_chunks(ledger):
    keys = [f"PO-{n:05d}" for n in range(25_000)]
    ledger.receive(WF, "big", [NewItem(k, {"n": k}) for k in keys], actor="t")

    result = ledger.transition(
        WF, [f"{WF}:{k}" for k in keys], to_status="validated", from_status="received", actor="t"
    )

    assert len(result.moved) == 25_000
    assert ledger.count_by_status(workflow=WF, run_id="big") == {"validated": 25_000}
    with ledger.connect() as conn:
        audit_rows = conn.execute("SELECT count(*) FROM conveyor.transitions WHERE to_status = 'validated'").fetchone()
    assert audit_rows == (25_000,)


def test_payload_update_recomputes_the_input_hash(ledger):
    receive(ledger, ["PO-1"])
    ledger.transition(WF, [f"{WF}:PO-1"], to_status="quarantined", actor="gate")
    corrected = {"key": "PO-1", "amount": 12.5, "notes": "ü"}

    ledger.transition(
        WF,
        {f"{WF}:PO-1": ItemUpdate(payload=corrected, reason="corrected")},
        to_status="received",
        from_status="quarantined",
        actor="reviewer:ana",
    )

    item = ledger.get(f"{WF}:PO-1")
    assert item.payload == corrected
    assert item.input_hash == input_hash(corrected)


def test_reads_filter_and_count(ledger):
    receive(ledger, ["PO-1", "PO-2"], run="r1")
    receive(ledger, ["PO-3"], run="r2")
    ledger.transition(WF, [f"{WF}:PO-1"], to_status="validated", actor="t")

    assert ledger.count_by_status(workflow=WF) == {"received": 2, "validated": 1}
    assert [i.item_id for i in ledger.items(run_id="r1", status="received")] == [f"{WF}:PO-2"]
    assert ledger.item_ids(workflow=WF, run_id="r1", status=["received", "validated"]) == [f"{WF}:PO-1", f"{WF}:PO-2"]
    assert ledger.items(status="done") == []  # any chain may name a status; none holds this one
    with pytest.raises(ValueError, match="invalid status name"):
        ledger.items(status="Done; DROP TABLE")


def test_unknown_item_raises_a_clear_error(ledger):
    with pytest.raises(UnknownItem, match="unknown item 'supplier_exceptions:nope'"):
        ledger.get(f"{WF}:nope")
    with pytest.raises(UnknownItem):
        ledger.history(f"{WF}:nope")


def test_effect_keys_are_claimed_once_per_item_and_step(ledger):
    ids = [f"{WF}:PO-1", f"{WF}:PO-2"]
    assert ledger.claim_effects("publish", ids, actor="a") == ids
    assert ledger.complete_effects("publish", {ids[0]: {"sent": True}}) == 1

    # A retry: the done item is not handed out again; the crashed claim is.
    assert ledger.claim_effects("publish", ids, actor="b") == [ids[1]]
    assert ledger.complete_effects("publish", {ids[0]: {"sent": "again"}}) == 0
    assert ledger.effects("publish")[ids[0]]["result"] == {"sent": True}
    assert ledger.claim_effects("pay", ids, actor="c") == ids
    assert ledger.effect_key(ids[0], "publish") == ledger.effect_key(ids[0], "publish")
    assert ledger.effect_key(ids[0], "publish") != ledger.effect_key(ids[0], "pay")


def test_batches_are_recorded_per_run_and_step(ledger):
    ledger.record_batch(WF, "r1", "gate", status="quarantined", source="x.csv", reason="column 'supplier_id' missing")
    ledger.record_batch(WF, "r1", "gate", status="accepted", source="x.csv", detail={"rows": 3})
    batch = ledger.get_batch(WF, "r1", "gate")
    assert batch["status"] == "accepted"
    assert batch["detail"] == {"rows": 3}
    assert ledger.get_batch(WF, "r2", "gate") is None


def test_unreachable_database_names_the_host_never_the_password():
    from conveyor.ledger import Ledger

    broken = Ledger("postgresql://conveyor:s3cret-pw@127.0.0.1:1/ledger")
    with pytest.raises(LedgerUnavailable) as raised:
        broken.get("x:y")
    assert "host=127.0.0.1 port=1 dbname=ledger" in str(raised.value)
    assert "s3cret-pw" not in str(raised.value)
