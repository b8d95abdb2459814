"""Feeds and inboxes with the names real upstream systems give them, on a real deployment's S3.

The session's native stack keeps every Conveyor file on an S3 API on loopback. A supplier extract
named ``extract #3 (final) 100% é.csv`` in a folder ``feeds (eu) #1`` and an invoice inbox named
``inbox (march)`` holding text and PDF invoices, a scanned PDF and a Word file: each run finishes,
every document ends paid once or held for a person, and the inbox is empty afterwards.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from conveyor.ledger import Ledger
from conveyor.quickstart import sample_feeds
from tests.deploy.test_deployment import INVOICES, SUPPLIER, effects, finish, keys, put, start
from tests.support.pdfs import scanned_pdf, text_pdf
from tests.support.stack import NativeStack

pytestmark = [pytest.mark.stack, pytest.mark.timeout(1200)]

DATA = Path(__file__).resolve().parents[2] / "include" / "data"


def test_an_extract_with_spaces_hash_percent_parentheses_and_accents_in_its_name(stack: NativeStack) -> None:
    _, text = sample_feeds.csv_delivery(
        DATA / "supplier_exceptions" / "extract.csv", key="exception_id", date_column="exception_date",
        delivery=9, today=datetime.now(UTC).date(), plant=sample_feeds.plant_supplier_rows,
    )
    path = "feeds (eu) #1/extract #3 (final) 100% é.csv"
    put(stack, path, text)

    started = start(stack, SUPPLIER, {"extract_path": path})
    run = finish(stack, started)

    assert run["state"] == "success"
    assert set(effects(stack, started)["statuses"]) == {"published", "rejected"}


def test_an_inbox_with_parentheses_takes_in_every_file_and_holds_what_it_cannot_read(stack: NativeStack) -> None:
    documents = sample_feeds.invoice_documents(DATA / "invoices" / "inbox", 2, datetime.now(UTC).date())
    texts = sorted(name for name in documents if name.endswith(".txt"))
    for name, body in documents.items():
        if name in texts[:2]:  # exported by an accounting system: the printed invoice as a PDF
            stack.s3().put_object(Bucket=stack.options.bucket, Key=f"conveyor/inbox (march)/{Path(name).stem}.pdf",
                                  Body=text_pdf(body.splitlines()))
        else:
            put(stack, f"inbox (march)/{name}", body)
    stack.s3().put_object(Bucket=stack.options.bucket, Key="conveyor/inbox (march)/scan 0042 (vendor).pdf",
                          Body=scanned_pdf())
    put(stack, "inbox (march)/remittance note.docx", "not a format the intake reads")

    started = start(stack, INVOICES, {"inbox_path": "inbox (march)"})
    run = finish(stack, started, timeout=900)

    assert run["state"] == "success"
    items = Ledger(stack.databases.ledger_dsn).items(workflow=INVOICES, run_id=started.run_id, limit=None)
    assert len(items) == len(documents) + 2  # every file became an item: none was left behind unsaid
    held = {i.business_key: i for i in items if i.business_key in ("scan 0042 (vendor)", "remittance note")}
    assert set(held) == {"scan 0042 (vendor)", "remittance note"}
    assert all(i.status == "rejected" for i in held.values())  # the scripted reviewer rejects what nobody can read
    paid = effects(stack, started)
    assert paid["statuses"].get("archived", 0) == len(paid["payments"]) > 0
    assert len({p[1] for p in paid["payments"]}) == len(paid["payments"])  # each invoice paid once
    assert [k for k in keys(stack, "inbox (march)/") if not k.endswith("/.conveyor-inbox")] == []
