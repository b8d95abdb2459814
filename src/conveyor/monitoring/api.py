"""HTTP routes of the health numbers and the health page, as a FastAPI ``router``.

The router has no prefix and no authentication of its own: it is included in Conveyor's plugin
app (mounted under ``/conveyor`` inside the Airflow API server), whose app-level dependency checks
Airflow's access to plugins. Routes, relative to that mount:

* ``GET /api/metrics``: every active workflow's health (``window_hours``, ``baseline_days``, ``as_of``);
* ``GET /api/metrics/{workflow}``: one workflow's health plus progress of its recent runs;
* ``GET /api/metrics/{workflow}/series``: per-bucket numbers for the charts (``days``, ``bucket_hours``);
* ``GET /api/metrics/{workflow}/accuracy``: each AI step's error of what passed unreviewed and its
  threshold curve (``days``, ``step``; as ``conveyor accuracy --json``);
* ``GET /api/metrics/{workflow}/runs``: items done of items received per run (``run_id``, ``limit``),
  each with its Airflow ``state`` (``failed``, ``running``...; None where unknown);
* ``GET /api/alerts``: open alert conditions and recent notifications (``workflow``);
* ``GET /health`` and ``GET /health/static/health.js``: the health page (charts drawn in the browser).

Every route is a plain ``def``: FastAPI runs it in its thread pool, so the blocking ledger reads
never stall the API server's event loop.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import HTMLResponse, Response

from conveyor.ledger.errors import LedgerUnavailable, UnknownWorkflow
from conveyor.ledger.store import Ledger
from conveyor.monitoring import metrics
from conveyor.monitoring.dag_runs import with_states
from conveyor.monitoring.store import MonitoringStore

router = APIRouter(tags=["Conveyor health"])

#: The page draws only with its own script and styles, and talks only to its own origin.
_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
        "img-src 'self' data:; frame-ancestors 'self'"
    ),
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
}


@lru_cache(maxsize=1)
def get_ledger() -> Ledger:
    """The ledger (connection ``conveyor_ledger``), resolved once per process."""
    from conveyor.ledger.hook import LedgerHook

    return LedgerHook(application_name="conveyor-api", reconnect_seconds=0).get_ledger()


LedgerDep = Annotated[Ledger, Depends(get_ledger)]
AsOf = Annotated[datetime | None, Query(description="ISO time the window ends at (default: now)")]
WindowHours = Annotated[float, Query(gt=0, le=24 * 31)]
BaselineDays = Annotated[int, Query(ge=1, le=31)]


def _as_of(value: datetime | None) -> datetime:
    try:
        as_of = metrics.utc(value)
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    # Windows reach back up to 90 days before as_of (and a baseline of weeks): a time near year 1
    # or 9999 would overflow the arithmetic. Nothing the ledger holds is that old or that late.
    if not 1970 <= as_of.year <= 9000:
        raise HTTPException(status_code=422, detail=f"as_of {as_of.isoformat()} is out of range: "
                                                    "give a time between 1970 and 9000")
    return as_of


def _workflow(name: str, ledger: Ledger | None = None) -> str:
    """A declared workflow's name; 404 for a workflow the ledger has no declaration of."""
    try:
        (ledger or get_ledger()).workflow(name)
    except UnknownWorkflow as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    except LedgerUnavailable as exc:
        raise _unavailable(exc) from None
    return name


def _unavailable(exc: LedgerUnavailable) -> HTTPException:
    from conveyor.review.webapp import RETRY_AFTER_SECONDS

    return HTTPException(status_code=503, detail=str(exc), headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


@router.get("/api/metrics")
def all_metrics(
    ledger: LedgerDep, as_of: AsOf = None, window_hours: WindowHours = 24, baseline_days: BaselineDays = 7
) -> dict[str, Any]:
    """Every workflow with activity in the compared period, with the open alerts."""
    when = _as_of(as_of)
    try:
        span = timedelta(hours=window_hours) + timedelta(days=baseline_days)
        declared = set(ledger.workflow_names())
        workflows = [w for w in metrics.active_workflows(ledger, since=when - span) if w in declared]
        health = [
            metrics.measure(ledger, w, as_of=when, window_hours=window_hours, baseline_days=baseline_days).as_xcom()
            for w in workflows
        ]
        alerts = MonitoringStore(ledger).open_alerts()
    except LedgerUnavailable as exc:
        raise _unavailable(exc) from None
    return {"as_of": when.isoformat(), "workflows": health, "open_alerts": alerts}


@router.get("/api/metrics/{workflow}")
def workflow_metrics(
    workflow: str,
    ledger: LedgerDep,
    as_of: AsOf = None,
    window_hours: WindowHours = 24,
    baseline_days: BaselineDays = 7,
    runs: Annotated[int, Query(ge=0, le=200)] = 10,
) -> dict[str, Any]:
    """One workflow's health, the progress of its recent runs and its open alerts."""
    name, when = _workflow(workflow, ledger), _as_of(as_of)
    try:
        health = metrics.measure(
            ledger, name, as_of=when, window_hours=window_hours, baseline_days=baseline_days
        ).as_xcom()
        health["runs"] = with_states(name, metrics.run_progress(ledger, name, as_of=when, limit=runs)) if runs else []
        health["open_alerts"] = MonitoringStore(ledger).open_alerts(name)
    except LedgerUnavailable as exc:
        raise _unavailable(exc) from None
    return health


@router.get("/api/metrics/{workflow}/series")
def workflow_series(
    workflow: str,
    ledger: LedgerDep,
    as_of: AsOf = None,
    days: Annotated[float, Query(gt=0, le=90)] = 7,
    bucket_hours: Annotated[float, Query(ge=0.25, le=24 * 7)] = 6,
) -> dict[str, Any]:
    """Throughput, exception rate, cycle time by stage and queue size/age per bucket, oldest first."""
    name, when = _workflow(workflow, ledger), _as_of(as_of)
    if days * 24 / bucket_hours > 500:
        raise HTTPException(status_code=422, detail="at most 500 buckets: raise bucket_hours or lower days")
    try:
        return metrics.series(ledger, name, as_of=when, days=days, bucket_hours=bucket_hours)
    except LedgerUnavailable as exc:
        raise _unavailable(exc) from None


@router.get("/api/metrics/{workflow}/accuracy")
def workflow_accuracy(
    workflow: str,
    ledger: LedgerDep,
    as_of: AsOf = None,
    days: Annotated[float, Query(gt=0, le=365)] = 7,
    step: str | None = None,
) -> dict[str, Any]:
    """Each AI step's error of what passed unreviewed (from spot checks), its threshold curve and the
    recommended ``min_confidence``; the same JSON as ``conveyor accuracy --json``."""
    from conveyor.monitoring.accuracy_reads import UnknownStep, accuracy_report

    name, when = _workflow(workflow, ledger), _as_of(as_of)
    try:
        return accuracy_report(ledger, name, step=step, days=days, as_of=when)
    except UnknownStep as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    except LedgerUnavailable as exc:
        raise _unavailable(exc) from None


@router.get("/api/metrics/{workflow}/runs")
def workflow_runs(
    workflow: str,
    ledger: LedgerDep,
    run_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
    as_of: AsOf = None,
) -> dict[str, Any]:
    """Items done of items received per run, newest first."""
    name, when = _workflow(workflow, ledger), _as_of(as_of)
    try:
        runs = with_states(name, metrics.run_progress(ledger, name, run_id=run_id, limit=limit, as_of=when))
    except LedgerUnavailable as exc:
        raise _unavailable(exc) from None
    return {"workflow": name, "runs": runs}


@router.get("/api/alerts")
def alerts(
    ledger: LedgerDep,
    workflow: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    """Conditions firing now, and the latest notifications (sent, pending or superseded)."""
    if workflow is not None:
        _workflow(workflow, ledger)
    store = MonitoringStore(ledger)
    try:
        open_alerts = store.open_alerts(workflow)
        recent = store.events(workflow=workflow, limit=limit)
    except LedgerUnavailable as exc:
        raise _unavailable(exc) from None
    return {
        "open": open_alerts,
        "recent": [
            {"id": e.id, "kind": e.kind, "state": e.state, "as_of": e.as_of, "alert": e.alert.to_dict()}
            for e in recent
        ],
    }


def _static(name: str) -> str:
    return (resources.files("conveyor.monitoring") / "static" / name).read_text(encoding="utf-8")


@router.get("/health", response_class=HTMLResponse)
def health_page() -> HTMLResponse:
    """The health page: charts over time and progress per run, drawn by ``health.js``."""
    return HTMLResponse(_static("health.html"), headers=_PAGE_HEADERS)


@router.get("/health/static/health.js")
def health_script() -> Response:
    return Response(_static("health.js"), media_type="text/javascript", headers=_PAGE_HEADERS)


def create_router() -> APIRouter:
    """The router, for the Conveyor app's ``ROUTER_FACTORIES`` (``conveyor.monitoring.api:create_router``)."""
    return router
