"""Operators that bring a workflow's input in.

* :class:`SnapshotExtractOperator` copies an upstream extract into a run-scoped landing folder,
  so a retried gate validates exactly the file the run started with.
* :class:`InboxIntakeOperator` records every document of an inbox folder as a ``received``
  ledger item (invoices), in one set-based write.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from conveyor.ledger.actors import task_actor
from conveyor.ledger.connection import conveyor_home
from conveyor.ledger_step import LedgerStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


def _safe(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)


class SnapshotExtractOperator(BaseOperator):
    """Copy the extract at ``source`` into ``$CONVEYOR_HOME/landing/<workflow>/<run>/``.

    A missing or empty file fails at once and without retries: nothing downstream runs on
    nothing. A re-run of the same run keeps the first snapshot.

    :param workflow: the workflow (names the landing folder).
    :param source: the upstream file (templated, e.g. ``{{ params.extract_path }}``).
    :param landing_dir: override of the landing folder.
    :return: the snapshot's path (XCom), for the gate.
    """

    template_fields: Sequence[str] = ("source", "landing_dir")

    def __init__(self, *, workflow: str, source: str, landing_dir: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.workflow = workflow
        self.source = source
        self.landing_dir = landing_dir

    def execute(self, context: Context) -> str:
        source = Path(self.source).expanduser()
        if not source.is_file():
            raise AirflowFailException(f"extract not found: {source} (set the DAG param to the feed's file)")
        if source.stat().st_size == 0:
            raise AirflowFailException(f"extract {source} is empty (0 bytes): the feed delivered nothing")
        folder = Path(self.landing_dir or conveyor_home() / "landing" / self.workflow / _safe(context["run_id"]))
        target = folder / source.name
        if target.is_file():
            self.log.info("Snapshot %s already taken for this run; keeping it.", target)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            self.log.info("Snapshot of %s taken at %s.", source, target)
        return str(target)


class InboxIntakeOperator(LedgerStepOperator):
    """Record each document in ``inbox_path`` as a ``received`` item of ``workflow``.

    The business key is the file name without its extension. An inbox without documents fails
    (silence is not success); a document already recorded with the same content is skipped; the
    same name with different content is refused and named.

    :param workflow: the workflow the documents enter.
    :param inbox_path: the folder (templated, e.g. ``{{ params.inbox_path }}``).
    :param extensions: file endings accepted.
    :param max_bytes: larger files are refused (named in the error).
    """

    template_fields: Sequence[str] = ("inbox_path",)

    def __init__(
        self,
        *,
        inbox_path: str,
        extensions: Sequence[str] = (".txt", ".csv", ".json"),
        max_bytes: int = 1_000_000,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.inbox_path = inbox_path
        self.extensions = tuple(e.lower() for e in extensions)
        self.max_bytes = max_bytes

    def execute(self, context: Context) -> dict[str, Any]:
        from conveyor.ledger import NewItem

        inbox = Path(self.inbox_path).expanduser()
        if not inbox.is_dir():
            raise AirflowFailException(f"inbox not found: {inbox}")
        files = sorted(p for p in inbox.iterdir() if p.is_file() and p.suffix.lower() in self.extensions)
        ledger = self.ledger()
        if not files:
            # A cleared run whose documents were taken in (and archived) by its first attempt.
            taken = ledger.count_by_status(workflow=self.workflow, run_id=context["run_id"])
            if taken:
                self.log.info("Inbox %s is empty; this run already took in %d document(s).", inbox,
                              sum(taken.values()))
                return {"documents": 0, "received": 0, "already_known": sum(taken.values())}
            others = sorted(p.name for p in inbox.iterdir())[:5]
            raise AirflowFailException(
                f"inbox {inbox} has no documents ({', '.join(self.extensions)})"
                + (f"; found only: {', '.join(others)}" if others else "")
            )
        too_big = [f"{p.name} ({p.stat().st_size:,} bytes)" for p in files if p.stat().st_size > self.max_bytes]
        if too_big:
            raise AirflowFailException(f"documents over {self.max_bytes:,} bytes: {', '.join(too_big)}")
        items = []
        for path in files:
            raw = path.read_bytes()
            items.append(
                NewItem(
                    business_key=path.stem,
                    payload={"path": str(path.resolve()), "name": path.name, "format": path.suffix.lower()[1:],
                             "bytes": len(raw)},
                    # Keyed on the document's bytes, so a changed document is a conflict, not a no-op.
                    input_hash=hashlib.sha256(raw).hexdigest(),
                )
            )
        result = ledger.receive(self.workflow, context["run_id"], items, actor=task_actor(context))
        if result.conflicts:
            listed = ", ".join(f"{k} (run {run}, {status})" for k, (run, status) in list(result.conflicts.items())[:5])
            raise AirflowFailException(
                f"{len(result.conflicts)} document(s) reuse a name already recorded with other content: {listed}"
            )
        summary = {"documents": len(files), "received": len(result.inserted), "already_known": len(result.unchanged)}
        self.log.info("Inbox %s: %s", inbox, summary)
        return summary
