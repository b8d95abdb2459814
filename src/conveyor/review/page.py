"""The review page: a static HTML/JS/CSS page served by the Conveyor app at ``/conveyor/review/``.

The Airflow UI shows it through the plugin's external views (see :mod:`conveyor.review.webapp`);
it calls :mod:`conveyor.review.api` with the UI's own session cookie. The page renders every item
field with ``textContent``, and is served with a Content-Security-Policy that allows no inline
script, so data can never run as code.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.responses import RedirectResponse, Response

#: file name -> media type; nothing else is served.
STATIC_FILES: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "review_kit.js": "text/javascript; charset=utf-8",
    "review_reasons.js": "text/javascript; charset=utf-8",
    "review_form.js": "text/javascript; charset=utf-8",
    "review_page.js": "text/javascript; charset=utf-8",
    "review_queue.js": "text/javascript; charset=utf-8",
    "review_item.js": "text/javascript; charset=utf-8",
    "review_decisions.js": "text/javascript; charset=utf-8",
    "review_editor.js": "text/javascript; charset=utf-8",
    "review.js": "text/javascript; charset=utf-8",
    "review.css": "text/css; charset=utf-8",
}

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


def _read(name: str) -> bytes:
    return resources.files("conveyor.review").joinpath("static", name).read_bytes()


def create_router() -> APIRouter:
    """The page router (mounted at the root of the Conveyor app)."""
    router = APIRouter(tags=["Conveyor review page"], include_in_schema=False)

    @router.get("/review")
    def page_without_slash(request: Request) -> RedirectResponse:
        # The page uses relative URLs ("static/...", "../api/..."), which need the trailing slash.
        return RedirectResponse(
            str(request.url.replace(path=request.url.path + "/")), status.HTTP_308_PERMANENT_REDIRECT
        )

    @router.get("/review/")
    def page() -> Response:
        return Response(_read("index.html"), media_type=STATIC_FILES["index.html"], headers=SECURITY_HEADERS)

    @router.get("/review/static/{name}")
    def static(name: str) -> Response:
        if name not in STATIC_FILES or name == "index.html":
            raise HTTPException(status.HTTP_404_NOT_FOUND, "not found")
        return Response(_read(name), media_type=STATIC_FILES[name], headers=SECURITY_HEADERS)

    return router
