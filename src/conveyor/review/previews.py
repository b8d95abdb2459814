"""Sign-off previews: the full report a sign-off approves, stored for the page its prompt links to.

When a :class:`~conveyor.review.operators.SignOffOperator` with ``preview=`` runs, it renders the
publish step's outputs for the items it approves (every file: ``report.md``, ``report.html``...)
and stores them here, one row per (workflow, run id, sign-off task) in
``conveyor.signoff_previews`` (migration 0014). A retry or a clear of the task replaces the row.
The Conveyor app serves a stored file at :func:`preview_path` (see
:mod:`conveyor.review.preview_page`), and the prompt's body links there, under Airflow's
``[api] base_url``, so the link works from the Airflow UI's Required Actions view.

A preview is not item data: it has no audit row (the sign-off's answer is Airflow's HITL record).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from urllib.parse import quote

from conveyor.ledger import signoff_previews
from conveyor.ledger.signoff_previews import StoredPreview
from conveyor.ledger.store import Ledger

#: Where the Conveyor app serves a sign-off preview, under the API server's base URL.
PREVIEW_ROUTE = "/conveyor/review/signoff"


@dataclass(frozen=True)
class Preview(StoredPreview):
    """The rendered report of one sign-off task of one run: the ledger's record of it (its fields
    are :class:`~conveyor.ledger.signoff_previews.StoredPreview`'s), with what a preview means."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.workflow, self.run_id, self.task_id)

    def main_file(self) -> str:
        """The file the prompt links first: the HTML rendering if there is one, else the first."""
        return next((n for n in self.files if is_html(n)), next(iter(self.files)))


def is_html(name: str) -> bool:
    """Whether a file is served as HTML (by its extension)."""
    return name.lower().endswith((".html", ".htm"))


def preview_path(workflow: str, run_id: str, task_id: str, name: str) -> str:
    """The path of one stored file of a preview in the Conveyor app (below the server's base URL)."""
    parts = (workflow, run_id, task_id, name)
    return PREVIEW_ROUTE + "".join("/" + quote(p, safe="") for p in parts)


def preview_url(base_url: str | None, workflow: str, run_id: str, task_id: str, name: str) -> str:
    """The link to one stored file under Airflow's ``[api] base_url`` (relative when it is unset).

    :param base_url: ``[api] base_url`` (``http://host:8080`` or ``http://host/airflow``); None or
        empty gives a path from the server's root, which the Airflow UI resolves against itself.
    """
    return (base_url or "").rstrip("/") + preview_path(workflow, run_id, task_id, name)


class SignOffPreviews:
    """The stored sign-off previews, over one ledger.

    :param ledger: the item ledger.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def save(self, previews: Sequence[Preview]) -> int:
        """Store ``previews`` in one statement, each replacing the one of the same sign-off task of
        the same run (a retry or a clear); returns how many were written.
        """
        latest = {p.key: p for p in previews}  # one row per key: the last given wins
        if not latest:
            return 0
        with self.ledger.connect() as conn:
            return signoff_previews.save(conn, list(latest.values()))

    def discard(self, keys: Sequence[tuple[str, str, str]]) -> int:
        """Remove the previews of these (workflow, run id, task id): a preview that could not be
        rendered this time must not leave the last one standing. Returns how many were removed."""
        if not keys:
            return 0
        with self.ledger.connect() as conn:
            return signoff_previews.discard(conn, keys)

    def get(self, workflow: str, run_id: str, task_id: str) -> Preview | None:
        """The stored preview of a sign-off task of a run (looked up by key), or None."""
        with self.ledger.connect() as conn:
            row = signoff_previews.get(conn, workflow, run_id, task_id)
        if row is None:
            return None
        return Preview(**{f.name: getattr(row, f.name) for f in fields(row)})
