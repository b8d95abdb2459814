"""The review API through a real ``airflow api-server`` with the Conveyor plugin and real tokens."""

from __future__ import annotations

import re
import threading
from datetime import datetime
from urllib.parse import quote

import httpx
import psycopg
import pytest

from conveyor.quickstart.api_server import ApiServer
from tests.review.conftest import route_to_review

WF = "supplier_exceptions"
BASE = "/conveyor/api/review"


def item_url(item_id: str, suffix: str = "") -> str:
    return f"{BASE}/items/{quote(item_id, safe='')}{suffix}"


@pytest.fixture(scope="module")
def clients(api_server: ApiServer):
    made = {user: api_server.client(user) for user in ("admin", "rita", "victor")}
    made["anonymous"] = api_server.client(None)
    yield made
    for client in made.values():
        client.close()


def test_plugin_is_registered_with_its_app_and_pages(clients):
    response = clients["admin"].get("/api/v2/plugins")
    assert response.status_code == 200
    plugin = next(p for p in response.json()["plugins"] if p["name"] == "conveyor")
    assert [(a["name"], a["url_prefix"]) for a in plugin["fastapi_apps"]] == [("Conveyor", "/conveyor")]
    views = {v["url_route"]: v for v in plugin["external_views"]}
    assert views["conveyor-review"]["href"] == "/conveyor/review/"
    assert views["conveyor-review"]["destination"] == "nav"
    assert views["conveyor-review-run"]["href"] == "/conveyor/review/?workflow={DAG_ID}&run_id={RUN_ID}"


def test_every_route_needs_an_authenticated_user(clients, ledger):
    route_to_review(ledger, WF, "run-1", pending=["A"])
    anonymous = clients["anonymous"]
    calls = [
        ("GET", f"{BASE}/queue", None),
        ("GET", f"{BASE}/search?q=A", None),
        ("GET", item_url(f"{WF}:A"), None),
        ("POST", item_url(f"{WF}:A", "/decision"), {"action": "approve"}),
        ("GET", "/conveyor/review/static/review.js", None),
        ("GET", "/conveyor/review/", None),
    ]
    for method, url, body in calls:
        response = anonymous.request(method, url, json=body, headers={"Accept": "application/json"})
        assert response.status_code == 401, (method, url, response.text)
    # A forged token is refused as Airflow refuses it.
    forged = anonymous.get(f"{BASE}/queue", headers={"Authorization": "Bearer not.a.token"})
    assert forged.status_code == 403
    # A person opening the page without a session is sent to Airflow's login and back.
    page = anonymous.get("/conveyor/review/", headers={"Accept": "text/html"})
    assert page.status_code == 302
    assert page.headers["location"].startswith("/auth/login?next=")
    assert ledger.get(f"{WF}:A").status == "pending_review"


def test_every_mounted_route_and_the_schema_and_docs_refuse_a_missing_or_forged_token_as_airflow_does(
    clients, ledger
):
    from conveyor.review.webapp import create_app

    route_to_review(ledger, WF, "run-1", pending=["A"])
    anonymous = clients["anonymous"]
    forged_headers = {"Authorization": "Bearer not.a.token", "Accept": "application/json"}
    airflow_answer = anonymous.get("/api/v2/dags", headers=forged_headers).status_code
    samples = {
        "item_id": quote(f"{WF}:A", safe=""),
        "workflow": WF,
        "run_id": "run-1",
        "task_id": "director_signoff",
        "path": "review.js",
        "name": "review.js",
    }
    routes = [r for r in create_app().routes if getattr(r, "methods", None)]
    paths = {r.path for r in routes}
    assert {"/openapi.json", "/docs", "/redoc"} <= paths
    checked = 0
    for route in routes:
        url = "/conveyor" + route.path
        for name, value in samples.items():
            url = url.replace("{" + name + ":path}", value).replace("{" + name + "}", value)
        assert "{" not in url, f"no sample value for {route.path}"
        for method in sorted(route.methods - {"HEAD"}):
            body = {"action": "approve"} if method == "POST" else None
            missing = anonymous.request(method, url, json=body, headers={"Accept": "application/json"})
            assert missing.status_code == 401, (method, url, missing.text)
            forged = anonymous.request(method, url, json=body, headers=forged_headers)
            assert forged.status_code == airflow_answer, (method, url, forged.text)
            checked += 1
    assert checked >= 12
    schema = clients["admin"].get("/conveyor/openapi.json")
    assert schema.status_code == 200 and "/api/review/queue" in schema.json()["paths"]
    assert clients["admin"].get("/conveyor/docs").status_code == 200
    assert ledger.get(f"{WF}:A").status == "pending_review"


def test_queue_lists_filters_and_pages(clients, ledger):
    route_to_review(ledger, WF, "run-1", pending=["A", "B"], quarantined=["C"], priorities={"B": 9})
    route_to_review(ledger, "invoice_processing", "run-2", quarantined=["INV-1"])
    admin = clients["admin"]

    everything = admin.get(f"{BASE}/queue").json()
    assert everything["total"] == 4
    assert everything["workflows"] == ["invoice_processing", WF]
    assert everything["items"][0]["item_id"] == f"{WF}:B"
    first = everything["items"][0]
    assert first["confidence"] == pytest.approx(0.41) and first["reason"] == "confidence 0.41 below 0.80"
    assert first["age_seconds"] >= 0 and first["waiting_since"]

    only_wf = admin.get(f"{BASE}/queue", params={"workflow": WF, "status": "pending_review"}).json()
    assert [i["item_id"] for i in only_wf["items"]] == [f"{WF}:B", f"{WF}:A"]
    by_run = admin.get(f"{BASE}/queue", params={"run_id": "run-2"}).json()
    assert [i["item_id"] for i in by_run["items"]] == ["invoice_processing:INV-1"]
    page_2 = admin.get(f"{BASE}/queue", params={"limit": 3, "offset": 3}).json()
    assert (page_2["total"], len(page_2["items"]), page_2["offset"]) == (4, 1, 3)

    assert admin.get(f"{BASE}/queue", params={"status": "validated"}).status_code == 422
    assert admin.get(f"{BASE}/queue", params={"limit": 0}).status_code == 422


def test_item_view_has_data_history_and_open_decisions(clients, ledger):
    route_to_review(ledger, WF, "run-1", quarantined=["PO/7"])

    view = clients["rita"].get(item_url(f"{WF}:PO/7"))

    assert view.status_code == 200, view.text
    body = view.json()
    assert body["item"]["item_id"] == f"{WF}:PO/7" and body["item"]["payload"] == {
        "key": "PO/7",
        "amount": 100,
    }
    assert [h["to_status"] for h in body["history"]] == ["received", "quarantined"]
    assert body["history"][1]["actor"] == "test.gate#1"
    assert body["awaiting_review"] and body["can_decide"]
    assert body["actions"] == ["approve", "reject", "correct"] and body["approve_to"] == "validated"
    assert clients["rita"].get(item_url(f"{WF}:nope")).status_code == 404
    assert clients["rita"].get(item_url("no-workflow-part")).status_code == 404


def test_viewer_may_read_but_not_decide(clients, ledger):
    route_to_review(ledger, WF, "run-1", pending=["A"])
    victor = clients["victor"]

    assert victor.get(f"{BASE}/queue").status_code == 200
    view = victor.get(item_url(f"{WF}:A")).json()
    assert view["awaiting_review"] and not view["can_decide"]
    refused = victor.post(item_url(f"{WF}:A", "/decision"), json={"action": "approve"})

    assert refused.status_code == 403
    assert "may not decide on review items of DAG 'supplier_exceptions'" in refused.json()["detail"]
    assert ledger.get(f"{WF}:A").status == "pending_review"
    assert len(ledger.history(f"{WF}:A")) == 3


def test_decide_records_the_authenticated_reviewer_then_409_for_the_next(clients, ledger):
    route_to_review(ledger, WF, "run-1", pending=["A"], validated=["C"])

    done = clients["rita"].post(item_url(f"{WF}:A", "/decision"), json={"action": "approve", "comment": "ok"})
    assert done.status_code == 200, done.text
    assert done.json()["to_status"] == "ai_processed" and done.json()["actor"] == "reviewer:rita"
    assert done.json()["item"]["status"] == "ai_processed"
    last = ledger.history(f"{WF}:A")[-1]
    assert (last.actor, last.reason, last.to_status) == ("reviewer:rita", "ok", "ai_processed")

    late = clients["admin"].post(item_url(f"{WF}:A", "/decision"), json={"action": "reject"})
    assert late.status_code == 409
    detail = late.json()["detail"]
    assert detail["code"] == "already_decided" and detail["decided_by"] == "reviewer:rita"
    assert detail["status"] == "ai_processed" and "already decided by reviewer:rita" in detail["message"]
    assert list(detail) == ["code", "message", "status", "decided_by", "decided_at"]
    assert datetime.fromisoformat(detail["decided_at"]) == last.at

    not_waiting = clients["admin"].post(item_url(f"{WF}:C", "/decision"), json={"action": "approve"})
    assert not_waiting.status_code == 409
    assert not_waiting.json()["detail"]["code"] == "not_awaiting_review"
    assert list(not_waiting.json()["detail"]) == ["code", "message", "status"]
    assert not_waiting.json()["detail"]["status"] == "validated"
    unknown = clients["admin"].post(item_url(f"{WF}:ZZZ", "/decision"), json={"action": "approve"})
    assert unknown.status_code == 404
    assert ledger.get(f"{WF}:A").status == "ai_processed"


def test_concurrent_http_decisions_exactly_one_wins(clients, ledger, api_server):
    keys = [f"K{i}" for i in range(8)]
    route_to_review(ledger, WF, "run-1", pending=keys)
    tokens = {user: api_server.token(user) for user in ("rita", "admin")}
    results: dict[str, list[int]] = {k: [] for k in keys}

    def decide(user: str, action: str) -> None:
        with httpx.Client(
            base_url=api_server.url, headers={"Authorization": f"Bearer {tokens[user]}"}
        ) as client:
            for key in keys:
                response = client.post(
                    item_url(f"{WF}:{key}", "/decision"), json={"action": action}, timeout=30
                )
                results[key].append(response.status_code)

    threads = [threading.Thread(target=decide, args=a) for a in (("rita", "approve"), ("admin", "reject"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    for key in keys:
        assert sorted(results[key]) == [200, 409], (key, results[key])
        decisions = [h for h in ledger.history(f"{WF}:{key}") if h.from_status == "pending_review"]
        assert len(decisions) == 1


def test_correct_and_resubmit_over_http(clients, ledger):
    route_to_review(ledger, WF, "run-1", quarantined=["Q"], pending=["P"])
    rita = clients["rita"]

    fixed = rita.post(
        item_url(f"{WF}:Q", "/decision"), json={"action": "correct", "payload": {"supplier_id": "S-9"}}
    )
    assert fixed.status_code == 200 and fixed.json()["to_status"] == "corrected"
    assert ledger.get(f"{WF}:Q").payload == {"key": "Q", "amount": 100, "supplier_id": "S-9"}
    again = rita.post(
        item_url(f"{WF}:Q", "/decision"), json={"action": "correct", "changes": {"amount": 120}}
    )
    assert again.status_code == 409  # corrected: no longer on the queue until validated again
    view = rita.get(item_url(f"{WF}:Q")).json()
    assert view["history"][-1]["detail"]["changes"] == [
        {"field": "supplier_id", "before": None, "after": "S-9", "added": True}
    ]
    both = rita.post(
        item_url(f"{WF}:P", "/decision"),
        json={"action": "correct", "payload": {"x": 1}, "changes": {"x": 1}},
    )
    assert both.status_code == 422 and "not both" in both.json()["detail"]
    nothing = rita.post(item_url(f"{WF}:P", "/decision"), json={"action": "approve", "changes": {"x": 1}})
    assert nothing.status_code == 422
    assert rita.post(item_url(f"{WF}:P", "/decision"), json={"action": "maybe"}).status_code == 422


def test_mutations_are_post_only_and_json_only(clients, ledger):
    route_to_review(ledger, WF, "run-1", pending=["A"])
    rita = clients["rita"]

    assert rita.put(item_url(f"{WF}:A", "/decision"), json={"action": "approve"}).status_code == 405
    assert rita.delete(item_url(f"{WF}:A")).status_code == 405
    form = rita.post(item_url(f"{WF}:A", "/decision"), data={"action": "approve"})
    assert form.status_code == 415
    text = rita.post(
        item_url(f"{WF}:A", "/decision"),
        content='{"action": "approve"}',
        headers={"Content-Type": "text/plain"},
    )
    assert text.status_code == 415
    assert ledger.get(f"{WF}:A").status == "pending_review"


INJECTION = "x' OR '1'='1'; DROP TABLE conveyor.items; --"
SCRIPT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def test_hostile_strings_in_filters_comments_and_payloads(clients, ledger):
    route_to_review(
        ledger, WF, "run-1", pending=["A", "B"], payloads={"A": {"note": SCRIPT, "sql": INJECTION}}
    )
    admin = clients["admin"]

    for params in ({"workflow": INJECTION}, {"run_id": INJECTION}, {"workflow": SCRIPT}):
        response = admin.get(f"{BASE}/queue", params=params)
        assert response.status_code == 200 and response.json()["total"] == 0, params
    assert admin.get(f"{BASE}/search", params={"q": INJECTION}).json()["items"] == []
    assert admin.get(item_url(f"{WF}:{INJECTION}")).status_code == 404

    done = admin.post(
        item_url(f"{WF}:A", "/decision"), json={"action": "approve", "comment": INJECTION + SCRIPT}
    )
    assert done.status_code == 200
    view = admin.get(item_url(f"{WF}:A"))
    assert view.headers["content-type"].startswith("application/json")
    body = view.json()
    assert body["item"]["payload"] == {"note": SCRIPT, "sql": INJECTION}
    assert body["history"][-1]["reason"] == INJECTION + SCRIPT
    assert ledger.history(f"{WF}:A")[-1].reason == INJECTION + SCRIPT
    with psycopg.connect(ledger.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM conveyor.items").fetchone()[0] == 2


def test_search_answers_where_is_item_x(clients, ledger):
    route_to_review(ledger, WF, "run-1", validated=["PO-1042"])
    route_to_review(ledger, "invoice_processing", "run-2", quarantined=["PO-1042"])

    found = clients["victor"].get(f"{BASE}/search", params={"q": "PO-1042"}).json()
    assert {(i["item_id"], i["status"]) for i in found["items"]} == {
        (f"{WF}:PO-1042", "validated"),
        ("invoice_processing:PO-1042", "quarantined"),
    }
    assert clients["victor"].get(f"{BASE}/search", params={"q": ""}).status_code == 422


def test_page_is_served_with_a_strict_content_security_policy(clients):
    admin = clients["admin"]
    page = admin.get("/conveyor/review/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "<script src=" in page.text and "<script>" not in page.text
    scripts = re.findall(r'<script src="static/([\w.]+)" defer></script>', page.text)
    assert scripts[-1] == "review.js" and len(scripts) >= 5
    for name in scripts:  # every part of the page is served, and none writes markup
        script = admin.get(f"/conveyor/review/static/{name}")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript"), name
        assert "innerHTML" not in script.text and "insertAdjacentHTML" not in script.text, name
    assert admin.get("/conveyor/review/static/secrets.txt").status_code == 404
    assert admin.get("/conveyor/review", follow_redirects=False).status_code == 308


def test_correcting_an_ai_answer_over_http_answers_422_with_the_problems(clients, ledger):
    from tests.review.test_review_queue import _declare_summary_step

    route_to_review(ledger, WF, "run-1", pending=["P"])
    _declare_summary_step(ledger)
    rita = clients["rita"]

    bad = rita.post(item_url(f"{WF}:P", "/decision"), json={"action": "correct", "changes": {"category": "nope"}})
    assert bad.status_code == 422
    assert "does not pass AI task 'summarize_exception'" in bad.json()["detail"]
    assert ledger.get(f"{WF}:P").status == "pending_review"

    good = rita.post(
        item_url(f"{WF}:P", "/decision"),
        json={
            "action": "correct",
            "changes": {"category": "quality", "summary": "Acme shipped three pumps with cracked housings on PO-7."},
        },
    )
    assert good.status_code == 200, good.text
    assert good.json()["to_status"] == "ai_processed"
    assert good.json()["item"]["ai_result"]["category"] == "quality"
    last = rita.get(item_url(f"{WF}:P")).json()["history"][-1]
    assert last["detail"]["model_answer"] == {"category": "late delivery", "summary": "maybe"}

def test_bulk_decisions_and_claims_over_http(clients, ledger):
    from conveyor import ReviewField, Workflow

    ledger.declare(
        Workflow(name="card_orders", review_card=(ReviewField("amount", kind="amount"),), priority_field="amount"),
        actor="tests",
    )
    route_to_review(
        ledger, "card_orders", "run-1", pending=["A", "B"], payloads={"A": {"amount": 5}, "B": {"amount": 50}}
    )
    route_to_review(ledger, WF, "run-1", pending=["C", "D", "E"])
    admin, rita, victor = clients["admin"], clients["rita"], clients["victor"]

    # The queue carries each item's card, checks, priority value and claim.
    claimed = rita.post(item_url("card_orders:B", "/claim"), json={})
    assert claimed.status_code == 200 and claimed.json()["reviewer"] == "rita"
    taken = admin.post(item_url("card_orders:B", "/claim"), json={})
    assert taken.status_code == 409
    assert taken.json()["detail"]["code"] == "claimed" and taken.json()["detail"]["reviewer"] == "rita"
    assert list(taken.json()["detail"]) == ["code", "message", "reviewer", "claimed_at", "expires_at"]
    assert datetime.fromisoformat(taken.json()["detail"]["expires_at"]) == datetime.fromisoformat(
        claimed.json()["expires_at"]
    )
    page = admin.get(f"{BASE}/queue", params={"workflow": "card_orders"}).json()
    assert [i["business_key"] for i in page["items"]] == ["B", "A"]
    first = page["items"][0]
    assert first["card"] == [{"label": "amount", "kind": "amount", "value": 50, "path": "amount"}]
    assert first["checks"] == ["confidence 0.41 below 0.80"] and first["priority_value"] == 50
    assert first["claim"]["reviewer"] == "rita" and first["claim"]["mine"] is False

    # Bulk by ids: one decided by someone else first is listed with who decided it.
    single = admin.post(item_url(f"{WF}:C", "/decision"), json={"action": "reject", "comment": "no"})
    assert single.status_code == 200
    bulk = rita.post(
        f"{BASE}/decisions", json={"action": "approve", "comment": "fine", "item_ids": [f"{WF}:C", f"{WF}:D"]}
    )
    assert bulk.status_code == 200, bulk.text
    body = bulk.json()
    assert [d["item_id"] for d in body["decided"]] == [f"{WF}:D"]
    assert [(r["item_id"], r["decided_by"]) for r in body["already_decided"]] == [(f"{WF}:C", "reviewer:admin")]

    # Bulk by filter; a viewer may not decide; a malformed call is refused.
    assert victor.post(f"{BASE}/decisions", json={"action": "reject", "filter": {"workflow": WF}}).status_code == 403
    assert rita.post(f"{BASE}/decisions", json={"action": "reject"}).status_code == 422
    by_filter = rita.post(
        f"{BASE}/decisions", json={"action": "reject", "comment": "x", "filter": {"workflow": "card_orders"}}
    )
    assert sorted(d["item_id"] for d in by_filter.json()["decided"]) == ["card_orders:A", "card_orders:B"]
    assert ledger.get(f"{WF}:E").status == "pending_review"
    # A viewer, who may not decide, does not claim; releasing ends only one's own claim.
    assert victor.post(item_url(f"{WF}:E", "/claim"), json={}).status_code == 403
    # Releasing: only one's own claim.
    assert admin.request("DELETE", item_url(f"{WF}:E", "/claim")).json() == {"released": 0}
