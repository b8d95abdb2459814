"""The Conveyor web app inside the Airflow API server (mounted at ``/conveyor``) and its UI entries.

One FastAPI app carries every Conveyor router; each router comes from a factory named in
:data:`ROUTER_FACTORIES` (``"module:function"`` returning an ``APIRouter``), so another part (the
monitoring page, for one) adds its routes by appending its factory there, and inherits the
app-level authentication. Every route needs an authenticated Airflow user who may see plugin views
(401 without a token, 403 without the permission); routes check DAG permissions themselves.

This module imports nothing heavy at module level: ``conveyor.plugin`` imports it in every Airflow
process, and the app is built only in the API server (see :func:`running_in_api_server`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

URL_PREFIX = "/conveyor"

#: ``"module:function"`` of every router of the Conveyor app, in mount order.
ROUTER_FACTORIES: list[str] = [
    "conveyor.review.api:create_router",
    "conveyor.review.work_api:create_router",
    "conveyor.review.page:create_router",
    "conveyor.review.preview_page:create_router",
    "conveyor.monitoring.api:create_router",
]

#: Set to ``1`` to build the app in a process that is not ``airflow api-server`` (e.g. a test that
#: runs Airflow's FastAPI app in-process, or a custom ASGI launcher); ``0`` never builds it.
ENV_FORCE = "CONVEYOR_API_APP"

#: What a 503 answer asks a client to wait while the ledger is away (a restart takes a few seconds).
RETRY_AFTER_SECONDS = 5

#: Where the review page lives, relative to the API server's base URL.
REVIEW_PAGE_PATH = f"{URL_PREFIX}/review/"


def running_in_api_server() -> bool:
    """Whether this process serves Airflow's API (where plugin apps are mounted)."""
    forced = os.environ.get(ENV_FORCE)
    if forced is not None:
        return forced.strip().lower() in {"1", "true", "yes"}
    argv = sys.argv
    return (len(argv) > 1 and argv[1] == "api-server") or (
        len(argv) > 2 and argv[2].endswith("api_fastapi/main.py")
    )


def create_app(router_factories: Sequence[str] | None = None) -> FastAPI:
    """The Conveyor FastAPI app with every router, each behind Airflow's authentication.

    :param router_factories: ``"module:function"`` router factories (default :data:`ROUTER_FACTORIES`).
    """
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

    from conveyor.review.auth import require_plugin_view

    # FastAPI's own schema and docs routes would skip the app's dependencies (answering anyone):
    # they are off, and served below as routes of the app, behind Airflow's authentication.
    app = FastAPI(
        title="Conveyor",
        description="Conveyor's review queue and pages inside the Airflow API server.",
        dependencies=[require_plugin_view],
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    # Hostile input (NUL, lone surrogates, NaN/Infinity) answers 400 before a route sees it.
    from conveyor.review.input_guard import InputGuard

    app.add_middleware(InputGuard)
    for spec in router_factories or ROUTER_FACTORIES:
        module_name, _, function = spec.partition(":")
        app.include_router(getattr(importlib.import_module(module_name), function)())

    schema_url = base_url_path(f"{URL_PREFIX}/openapi.json")

    @app.get("/openapi.json", include_in_schema=False)
    def openapi_schema() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    def swagger_docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=schema_url, title="Conveyor API")

    @app.get("/redoc", include_in_schema=False)
    def redoc_docs() -> HTMLResponse:
        return get_redoc_html(openapi_url=schema_url, title="Conveyor API")

    import psycopg

    from conveyor.ledger.errors import LedgerUnavailable
    from conveyor.ledger.faults import first_line

    async def ledger_away(request: Request, exc: Exception) -> JSONResponse:
        # The ledger restarting or crashed is transient: the client tries again, nothing was half-done
        # (every decision is one transaction). Never a 500 and a traceback.
        return JSONResponse(
            {"detail": f"the ledger is unavailable, try again shortly: {first_line(exc)}"},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )

    for away in (LedgerUnavailable, psycopg.OperationalError, psycopg.InterfaceError):
        app.add_exception_handler(away, ledger_away)

    @app.exception_handler(HTTPException)
    async def login_for_pages(request: Request, exc: HTTPException) -> Any:
        # A person opening a page without a session goes to Airflow's login, then comes back.
        wants_page = request.method == "GET" and "text/html" in request.headers.get("accept", "")
        if exc.status_code == 401 and wants_page and not request.url.path.rstrip("/").endswith("/static"):
            from airflow.api_fastapi.app import get_auth_manager

            return RedirectResponse(
                get_auth_manager().get_url_login(next_url=str(request.url)), status_code=302
            )
        return await http_exception_handler(request, exc)

    return app


def base_url_path(path: str) -> str:
    """``path`` under the path of ``[api] base_url`` (Airflow served under a sub-path)."""
    from urllib.parse import urlparse

    from airflow.configuration import conf

    base = conf.get("api", "base_url", fallback="/") or "/"
    base_path = urlparse(base).path if base.startswith(("http://", "https://")) else base
    return base_path.rstrip("/") + path


def fastapi_apps() -> list[dict[str, Any]]:
    """The plugin's ``fastapi_apps``: the Conveyor app, only in the API server."""
    if not running_in_api_server():
        return []
    return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Conveyor"}]


def external_views() -> list[dict[str, Any]]:
    """The plugin's ``external_views``: the review queue in the navigation and on each DAG run."""
    page = base_url_path(REVIEW_PAGE_PATH)
    return [
        {
            "name": "Review queue",
            "href": page,
            "destination": "nav",
            "category": "browse",
            "url_route": "conveyor-review",
        },
        {
            "name": "Review",
            "href": page + "?workflow={DAG_ID}&run_id={RUN_ID}",
            "destination": "dag_run",
            "url_route": "conveyor-review-run",
        },
    ]
