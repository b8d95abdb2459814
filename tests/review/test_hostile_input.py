"""Hostile input answers a 4xx naming the problem, never 500 (issue 21, point 3), through the real
API server; the keep-alive connection keeps working after each refusal."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.review.conftest import route_to_review

WF = "supplier_exceptions"
BASE = "/conveyor/api/review"
ITEM = f"{BASE}/items/{quote(f'{WF}:Q', safe='')}"


@pytest.fixture(scope="module")
def rita(api_server):
    client = api_server.client("rita")
    yield client
    client.close()


def raw(text: str) -> dict:
    """A JSON body sent byte for byte (escapes as written), as a hostile client would."""
    return {"content": text.encode(), "headers": {"Content-Type": "application/json"}}


CASES = [
    ("nul-in-comment", "POST", f"{ITEM}/decision", raw('{"action": "reject", "comment": "a\\u0000b"}'), "NUL"),
    ("nul-in-correction", "POST", f"{ITEM}/decision",
     raw('{"action": "correct", "changes": {"notes": "a\\u0000b"}}'), "NUL"),
    ("nul-in-item-id", "GET", f"{BASE}/items/{WF}%3AQ%00x", {}, "NUL"),
    ("nul-in-decided-item-id", "POST", f"{BASE}/items/{WF}%3AQ%00x/decision", raw('{"action": "approve"}'), "NUL"),
    ("nul-in-run-id", "GET", f"{BASE}/queue?run_id=run%001", {}, "NUL"),
    ("nul-in-search", "GET", f"{BASE}/search?q=EX%00", {}, "NUL"),
    ("nul-in-bulk-ids", "POST", f"{BASE}/decisions", raw('{"action": "reject", "item_ids": ["a\\u0000"]}'), "NUL"),
    ("lone-surrogate-comment", "POST", f"{ITEM}/decision",
     raw('{"action": "reject", "comment": "\\ud800x"}'), "surrogate"),
    ("lone-surrogate-correction", "POST", f"{ITEM}/decision",
     raw('{"action": "correct", "changes": {"notes": "\\ud800x"}}'), "surrogate"),
    ("lone-surrogate-in-query", "GET", f"{BASE}/search?q=%ED%A0%80x", {}, "UTF-8"),
    ("nan-in-correction", "POST", f"{ITEM}/decision", raw('{"action": "correct", "changes": {"amount": NaN}}'),
     "NaN"),
    ("infinity-in-correction", "POST", f"{ITEM}/decision",
     raw('{"action": "correct", "changes": {"amount": Infinity}}'), "Infinity"),
    ("1e400-in-correction", "POST", f"{ITEM}/decision", raw('{"action": "correct", "changes": {"amount": 1e400}}'),
     "finite"),
    ("huge-offset", "GET", f"{BASE}/queue?offset=9223372036854775808", {}, "offset"),
    ("as-of-year-1", "GET", "/conveyor/api/metrics?as_of=0001-01-01T00:00:00Z", {}, "as_of"),
    ("as-of-year-1-workflow", "GET", f"/conveyor/api/metrics/{WF}?as_of=0001-01-01T00:00:00Z", {}, "as_of"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "url", "extra", "word"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_answers_4xx_naming_the_problem(rita, ledger, method, url, extra, word):
    route_to_review(ledger, WF, "run-1", quarantined=["Q"])
    answer = rita.request(method, url, **extra)
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    assert word.lower() in answer.text.lower(), answer.text
    # Nothing was applied, and the connection still serves the next request.
    assert ledger.get(f"{WF}:Q").status == "quarantined"
    after = rita.get(f"{BASE}/queue", params={"workflow": WF})
    assert after.status_code == 200 and after.json()["total"] == 1
