"""Fixtures of the review tests: items routed to review in the real ledger, and a real Airflow
API server (``airflow api-server`` subprocess) with the Conveyor plugin, simple-auth users and
real JWT tokens."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from conveyor.ledger import Ledger, NewItem
from conveyor.ledger.statuses import Status, get_workflow
from conveyor.ledger.store import ItemUpdate
from conveyor.quickstart.api_server import ApiServer, ApiServerProcess

#: simple auth manager users: name -> (role, password)
USERS: dict[str, tuple[str, str]] = {
    "admin": ("admin", "admin-pass-1"),
    "rita": ("user", "rita-pass-1"),
    "victor": ("viewer", "victor-pass-1"),
}


def route_to_review(
    ledger: Ledger,
    workflow: str,
    run_id: str,
    *,
    pending: Sequence[str] = (),
    quarantined: Sequence[str] = (),
    validated: Sequence[str] = (),
    payloads: dict[str, dict] | None = None,
    priorities: dict[str, int] | None = None,
) -> None:
    """Receive items and route them as the gate and the AI step would.

    ``pending`` items go received -> validated -> pending_review (review target ai_processed, with a
    model output and confidence); ``quarantined`` items fail the gate; ``validated`` pass it.
    """
    payloads = payloads or {}
    priorities = priorities or {}
    keys = [*pending, *quarantined, *validated]
    ledger.receive(
        workflow,
        run_id,
        [NewItem(k, payloads.get(k, {"key": k, "amount": 100}), priority=priorities.get(k, 0)) for k in keys],
        actor="test.extract#1",
    )
    ids = lambda ks: [f"{workflow}:{k}" for k in ks]  # noqa: E731
    flow = get_workflow(workflow)
    to_validated = flow.chain[1 : flow.chain.index(Status.VALIDATED) + 1]
    for step in to_validated:
        # quarantined items stop at the gate's input; the others pass the gate.
        moving = [*pending, *validated] if step == Status.VALIDATED else keys
        if moving:
            ledger.transition(
                workflow, ids(moving), to_status=step, actor="test.step#1", from_status=_previous(flow, step)
            )
        if quarantined and step == flow.gate_input:
            ledger.transition(
                workflow,
                ids(quarantined),
                to_status="quarantined",
                actor="test.gate#1",
                from_status=step,
                reason="expect_column_values_to_not_be_null: supplier_id is null",
            )
    if quarantined and flow.gate_input == Status.RECEIVED:
        ledger.transition(
            workflow,
            ids(quarantined),
            to_status="quarantined",
            actor="test.gate#1",
            from_status="received",
            reason="expect_column_values_to_not_be_null: supplier_id is null",
        )
    if pending:
        ledger.transition(
            workflow,
            {
                i: ItemUpdate(
                    reason="confidence 0.41 below 0.80",
                    ai_result={"category": "late delivery", "summary": "maybe"},
                    confidence=0.41,
                    review_target=flow.next_after(Status.VALIDATED).value,
                )
                for i in ids(pending)
            },
            to_status="pending_review",
            actor="test.ai#1",
            from_status="validated",
        )


def _previous(flow, step):
    return flow.chain[flow.chain.index(step) - 1]


def _wants_api_server(session: pytest.Session) -> bool:
    return any("api_server" in getattr(item, "fixturenames", ()) for item in session.items)


@pytest.fixture(scope="package", autouse=True)
def _api_server_process(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApiServerProcess | None]:
    """Launch the API server as soon as this folder's tests start, when any of them needs it.

    It takes tens of seconds to come up; the web tests (named to run last) find it ready.
    """
    if not _wants_api_server(request.session):
        yield None
        return
    request.getfixturevalue("airflow_db")
    request.getfixturevalue("ledger_dsn")
    process = ApiServerProcess(tmp_path_factory.mktemp("api-server"), USERS)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="package")
def api_server(_api_server_process: ApiServerProcess | None) -> ApiServer:
    """A real Airflow API server on a free port, with the Conveyor plugin mounted at /conveyor."""
    assert _api_server_process is not None
    return _api_server_process.wait_ready(180)
