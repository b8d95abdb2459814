"""The sign-off preview page: the stored report a sign-off prompt links to, at
``/conveyor/review/signoff/{workflow}/{run_id}/{task_id}/{name}``.

It serves one file of the preview the sign-off task stored (:mod:`conveyor.review.previews`), to a
user who may read the workflow's human-in-the-loop details (as the prompt itself), behind the
Conveyor app's authentication (a person without a session goes to Airflow's login and back).

An HTML rendering is served as HTML under ``Content-Security-Policy: sandbox`` (a unique origin:
no script runs, no form posts, no cookie or API of Airflow is reachable from it, even if a
template let a feed's text through unescaped); every other file (Markdown, text) as plain text.
An unknown preview or file answers 404 saying what is stored.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from fastapi.responses import Response

from conveyor.review.api import QueueDep
from conveyor.review.auth import CurrentUser, require_dag_access
from conveyor.review.previews import SignOffPreviews, is_html

#: Headers of every preview file: sandboxed (no scripts, own origin), never sniffed, never cached.
PREVIEW_HEADERS: dict[str, str] = {
    "Content-Security-Policy": (
        "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def create_router() -> APIRouter:
    """The preview page router (mounted at the root of the Conveyor app)."""
    router = APIRouter(tags=["Conveyor sign-off preview"], include_in_schema=False)

    @router.get("/review/signoff/{workflow}/{run_id}/{task_id}/{name}")
    def signoff_preview(
        workflow: str, run_id: str, task_id: str, name: str, queue: QueueDep, user: CurrentUser
    ) -> Response:
        """One file of the report a sign-off approves, as the sign-off task rendered it."""
        require_dag_access(user, workflow, "GET")
        preview = SignOffPreviews(queue.ledger).get(workflow, run_id, task_id)
        if preview is None:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND,
                f"no sign-off preview stored for task {task_id!r} of {workflow} run {run_id!r}: it is stored "
                "when a SignOffOperator with preview= runs (clear the sign-off task to render it again)",
            )
        if name not in preview.files:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND,
                f"the sign-off preview of task {task_id!r} of {workflow} run {run_id!r} has no file {name!r}; "
                f"it has {', '.join(map(repr, preview.files))}",
            )
        media_type = "text/html; charset=utf-8" if is_html(name) else "text/plain; charset=utf-8"
        return Response(preview.files[name], media_type=media_type, headers=PREVIEW_HEADERS)

    return router
