"""The embedded models and the guardrail pieces, on the sample data of include/."""

from __future__ import annotations

import json
import math
from datetime import date

import pytest

from conveyor.ai import checks, confidence
from conveyor.ai.models.classifier import get_classifier
from conveyor.ai.retries import RetryPolicy, is_transient
from conveyor_examples.invoice_extractor import extract, parse_number
from conveyor_examples.supplier_drafter import draft
from tests.ai.seeding import DATA, INBOX, MALFORMED_INVOICES, exception_labels, exception_rows


def test_the_exception_classifier_is_right_where_it_is_confident_and_unsure_elsewhere():
    classifier = get_classifier("supplier_exception_notes.csv")
    rows = exception_rows()
    labels = exception_labels()
    predictions = classifier.predict([r["notes"] for r in rows])
    truth = [labels[r["exception_id"]] for r in rows]

    accuracy = sum(p == t for (p, _), t in zip(predictions, truth, strict=True)) / len(rows)
    confident = [(p, t) for (p, c), t in zip(predictions, truth, strict=True) if c >= 0.7]
    assert accuracy >= 0.9
    assert sum(p == t for p, t in confident) / len(confident) >= 0.97
    values = sorted(c for _, c in predictions)
    assert values[0] < 0.5 and values[-1] > 0.9  # confidences vary: the review route is exercised


def test_the_fitted_classifier_is_cached_per_data_version(tmp_path, monkeypatch):
    from conveyor.ai.models import classifier as module

    monkeypatch.setenv("CONVEYOR_HOME", str(tmp_path))
    monkeypatch.setattr(module, "_FITTED", {})
    first = get_classifier("spend_lines.csv")
    cached = list((tmp_path / "models").glob("spend_lines-*.pkl"))
    assert len(cached) == 1 and first.digest in cached[0].name
    monkeypatch.setattr(module, "_FITTED", {})
    again = get_classifier("spend_lines.csv")  # loaded from $CONVEYOR_HOME, same answers
    texts = ["Toner cartridge and copy paper", "Flight to Berlin and hotel"]
    assert again.predict(texts) == first.predict(texts)
    assert [label for label, _ in first.predict(texts)] == ["office_supplies", "travel"]


def test_the_extractor_reads_all_sixty_sample_invoices_exactly():
    expected = {
        json.loads(line)["business_key"]: json.loads(line)["fields"]
        for line in (DATA / "invoices" / "expected_fields.jsonl").read_text().splitlines()
    }
    for path in sorted(INBOX.iterdir()):
        result = extract(path.read_text(encoding="utf-8"), path.suffix)
        assert result.fields == expected[path.stem], path.name  # 23 == 23.0: quantities parse as numbers
        assert result.confidence >= 0.95 and result.problems == []


def test_the_extractor_confidence_drops_with_each_inconsistency():
    scores = {p.name: extract(p.read_text(encoding="utf-8"), p.suffix) for p in MALFORMED_INVOICES.iterdir()}
    assert scores["total_mismatch.txt"].confidence == pytest.approx(0.66)
    assert scores["total_mismatch.txt"].problems == ["line items add up to 632.80, the total says 732.80"]
    assert scores["line_arithmetic.txt"].confidence == pytest.approx(0.81)
    assert scores["due_before_invoice.csv"].confidence == pytest.approx(0.83)
    missing = extract("INVOICE\nVendor: Acme\nTotal: 10.00\n- Pens | 1 x 10.00 = 10.00\n", "txt")
    assert missing.fields["invoice_number"] is None
    assert missing.confidence == pytest.approx(0.96 - 3 * 0.2 - 2 * 0.05)
    assert extract("{not json", "json").confidence == 0.0
    assert parse_number("1.250,40") == 1250.40 and parse_number("1,250.40") == 1250.40


def test_the_drafter_writes_one_sentence_that_names_supplier_po_and_amount():
    row = exception_rows()[8]  # "Only 7 plastic housings delivered, 2 missing, no explanation from supplier"
    row = {**row, "quantity_ordered": "9", "quantity_received": "7"}
    text = draft("short_shipment", row)
    who = f"{row['supplier_name']} ({row['supplier_id']})"
    assert text.startswith(f"{who} short-shipped on {row['po_number']}: ")
    assert "7 of 9 units received (2 short)" in text
    assert text.endswith(f"{float(row['amount']):,.2f} EUR at stake.")
    passed = checks.run_checks(
        [checks.NotVague("draft"), checks.OneSentence("draft"), checks.Mentions("draft", ["po_number"])],
        {"draft": text},
        row,
    )
    assert passed == []


def test_rule_checks_name_the_field_the_value_and_the_rule():
    today = date(2026, 11, 30)
    invoice = {
        "vendor": "Acme",
        "invoice_number": None,
        "invoice_date": "2027-01-05",
        "due_date": "2026-12-01",
        "currency": "JPY",
        "total": 2_000_000.0,
        "line_items": [{"description": "Pens", "quantity": 2, "unit_price": 5.0, "amount": 12.0}],
    }
    failed = checks.run_checks(
        [
            checks.Required(["vendor", "invoice_number"]),
            checks.OneOf("currency", ["EUR", "USD"]),
            checks.InRange("total", 0, 1_000_000),
            checks.PlausibleDates(today=today),
            checks.LineItemsAddUp(),
        ],
        invoice,
        {},
    )
    assert failed == [
        ("required", "required field 'invoice_number' missing"),
        ("not_allowed", "currency 'JPY' is not one of EUR, USD"),
        ("out_of_range", "total 2,000,000.00 is outside the plausible range (0, 1,000,000]"),
        ("implausible_date", "invoice_date 2027-01-05 is in the future"),
        ("does_not_add_up", "line 1 (Pens): 2 x 5.00 = 10.00, not 12.00"),
    ]
    short = checks.NotVague("draft")({"draft": "Issue."}, {})
    assert short == "draft is too short to be useful (1 words): 'Issue.'"
    two = checks.OneSentence("draft")({"draft": "Late. Also short."}, {})
    assert two.startswith("draft has more than one sentence")


def test_label_logprob_confidence_reads_the_label_tokens_only():
    content = '{"category": "late_delivery", "draft": "x"}'
    tokens = ['{"', "category", '":', ' "', "late", "_delivery", '",', ' "', "draft", '":', ' "', "x", '"}']
    logprobs = [{"token": t, "logprob": -0.01} for t in tokens]
    logprobs[4]["logprob"] = -0.9  # "late"
    logprobs[5]["logprob"] = -0.1  # "_delivery"
    assert confidence.label_probability(content, logprobs, "category") == pytest.approx(math.exp(-1.0))
    assert confidence.from_logprobs(content, None, "category") is None
    assert confidence.mean_token_probability(logprobs) == pytest.approx(math.exp(-1.11 / 13))
    assert confidence.agreement([{"c": "a"}, {"c": "b"}, {"c": "a"}], "c") == (0, pytest.approx(2 / 3))


def test_which_errors_are_retried_and_how_long_the_policy_waits():
    from pydantic_ai.exceptions import ModelHTTPError, ModelRateLimitError, ModelTimeoutError
    from tenacity import RetryCallState

    policy = RetryPolicy(max_attempts=4, backoff_base=0.5, backoff_max=8, max_retry_after=60)
    limited = ModelRateLimitError("m", "slow down", retry_after=7.0)
    assert is_transient(limited) and is_transient(ModelTimeoutError("m", "timed out"))
    assert not is_transient(ModelHTTPError(400, "m", {"message": "bad"}))
    assert is_transient(ModelHTTPError(502, "m", {"message": "bad gateway"}))
    assert not policy.should_retry(ModelRateLimitError("m", "wait an hour", retry_after=3600))

    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})
    state.set_exception((ModelRateLimitError, limited, None))
    waits = {policy.wait()(state) for _ in range(50)}
    assert min(waits) >= 7.0 and max(waits) <= 7.7  # Retry-After, plus at most 10% jitter
    state.set_exception((ModelTimeoutError, ModelTimeoutError("m", "t"), None))
    state.attempt_number = 3
    backoffs = {policy.wait()(state) for _ in range(50)}
    assert 0 <= min(backoffs) and max(backoffs) <= 2.0 and len(backoffs) > 10  # full jitter up to 0.5 * 2^2
