"""``ArchiveOperator``: move each finished item's file out of the inbox, on object storage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException

from conveyor.ledger_step import LedgerStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class ArchiveOperator(LedgerStepOperator):
    """Move each item's file (its payload's ``path_field``, a storage URL) to the archive, then move
    the item on.

    Idempotent: a file already in the archive (an earlier attempt) counts as moved; a file in
    neither place fails the task and names it.

    :param workflow: the workflow's :class:`~conveyor.workflow.Workflow` (or its stored name).
    :param archive_folder: an object-storage URL (templated); default ``<storage_base>/archive/<workflow>``.
    :param path_field: the payload field holding the file's URL.
    :param from_status: status of items to archive (e.g. ``paid``).
    :param to_status: status after archiving (e.g. ``archived``).
    """

    template_fields: Sequence[str] = ("archive_folder",)

    def __init__(
        self,
        *,
        from_status: str,
        to_status: str,
        archive_folder: str | None = None,
        path_field: str = "path",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.archive_folder = archive_folder
        self.path_field = path_field
        self.from_status = from_status
        self.to_status = to_status

    def execute(self, context: Context) -> dict[str, Any]:
        from conveyor import storage
        from conveyor.ledger.actors import task_actor
        from conveyor.templated import or_none

        ledger = self.ledger(context)
        items = ledger.items(workflow=self.workflow, run_id=context["run_id"], status=self.from_status, limit=None)
        given = or_none(self.archive_folder)
        folder = storage.as_path(given) if given else storage.under("archive", self.workflow)
        moved_files, missing = 0, []
        for item in items:
            url = str(item.payload.get(self.path_field) or "")
            if not url:
                missing.append(f"{item.item_id} (no {self.path_field})")
                continue
            source = storage.as_path(url)
            try:
                moved_files += storage.move(source, folder / source.name)
            except FileNotFoundError:
                missing.append(f"{item.item_id} ({url})")
        if missing:
            raise AirflowFailException(
                f"{len(missing)} file(s) are neither where the items say nor in {folder}: " + ", ".join(missing[:5])
            )
        result = ledger.transition(
            self.workflow, [i.item_id for i in items], to_status=self.to_status, from_status=self.from_status,
            actor=task_actor(context), reason=f"archived to {folder}", atomic=False,
        )
        return {"archived": len(result.moved), "files_moved": moved_files, "archive_folder": str(folder)}
