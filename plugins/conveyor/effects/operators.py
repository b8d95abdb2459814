"""Operators with side effects: publish a report, pay invoices, archive files.

Each effect is claimed in the ledger under an idempotency key (item or report, and step) before
it happens and marked done after, so clearing and re-running a task never publishes or pays
twice. Items then move on with a guarded transition; a re-run moves nothing twice.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException

from conveyor.ledger.actors import task_actor
from conveyor.ledger.connection import conveyor_home
from conveyor.ledger_step import LedgerStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context



def _write_atomically(path: Path, text: str) -> str:
    """Write ``text`` to ``path`` through a temporary file; return its sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class PublishReportOperator(LedgerStepOperator):
    """Publish the run's approved items as one report (Markdown and HTML) and an outbox record.

    A run with nothing approved, or an item with an empty draft, fails loudly: a blank report is
    never published. The outbox record is the ledger effect ``publish_report`` of the run; once
    it is done, a re-run publishes nothing again and moves only the items that report contained.

    :param workflow: the workflow whose items are reported.
    :param title: the report title.
    :param recipients: who the report goes to (recorded in the outbox).
    :param output_dir: folder of the report files (default ``$CONVEYOR_HOME/output/<workflow>``).
    :param group_by: payload field that groups items into sections.
    :param group_title: payload field naming a section.
    :param from_status: the status of items to report (default ``approved``).
    :param to_status: the status published items move to (default ``published``).
    """

    template_fields: Sequence[str] = ("output_dir", "title")
    ui_color = "#d5f5e3"

    def __init__(
        self,
        *,
        title: str,
        recipients: Sequence[str],
        output_dir: str | None = None,
        group_by: str = "supplier_id",
        group_title: str = "supplier_name",
        from_status: str = "approved",
        to_status: str = "published",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not recipients:
            raise ValueError("a report needs at least one recipient")
        self.title = title
        self.recipients = list(recipients)
        self.output_dir = output_dir
        self.group_by = group_by
        self.group_title = group_title
        self.from_status = from_status
        self.to_status = to_status

    def execute(self, context: Context) -> dict[str, Any]:
        from conveyor.effects.report import BlankReportError, build_report

        ledger = self.ledger()
        run_id = context["run_id"]
        actor = task_actor(context)
        report_key = f"{self.workflow}:report:{run_id}"
        done = ledger.effects("publish_report", [report_key]).get(report_key)
        if done and done["state"] == "done":
            result = done["result"]
            self.log.info("Report of run %s was already published to %s; not publishing again.",
                          run_id, result["path"])
        else:
            items = ledger.items(workflow=self.workflow, run_id=run_id, status=self.from_status, limit=None)
            try:
                report = build_report(self.title, run_id, items, group_by=self.group_by,
                                      group_title=self.group_title)
            except BlankReportError as exc:
                counts = ledger.count_by_status(workflow=self.workflow, run_id=run_id)
                raise AirflowFailException(f"{exc}. Items of this run by status: {counts or 'none'}") from None
            ledger.claim_effects("publish_report", [report_key], actor=actor)
            folder = Path(self.output_dir or conveyor_home() / "output" / self.workflow)
            stem = "report-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
            markdown = folder / f"{stem}.md"
            digest = _write_atomically(markdown, report.to_markdown())
            _write_atomically(folder / f"{stem}.html", report.to_html())
            result = {
                "path": str(markdown),
                "html": str(folder / f"{stem}.html"),
                "sha256": digest,
                "recipients": self.recipients,
                "items": report.item_ids,
                "sections": len(report.sections),
            }
            ledger.complete_effects("publish_report", {report_key: result})
            self.log.info("Published %d item(s) in %d section(s) to %s for %s.",
                          len(report.item_ids), len(report.sections), markdown, ", ".join(self.recipients))
        moved = ledger.transition(
            self.workflow, result["items"], to_status=self.to_status, from_status=self.from_status,
            actor=actor, reason=f"published in {Path(result['path']).name}",
        )
        late = ledger.item_ids(workflow=self.workflow, run_id=run_id, status=self.from_status)
        if late:
            self.log.warning("%d item(s) were approved after the report was published; they wait for "
                             "the next report: %s", len(late), ", ".join(late[:5]))
        return {"path": result["path"], "items": len(result["items"]), "moved_now": len(moved.moved),
                "recipients": self.recipients}


class PaymentOperator(LedgerStepOperator):
    """Pay the run's approved invoices: one row per invoice in ``conveyor.payments``.

    The payments table stands for the ERP. Every payment carries the ledger's idempotency key of
    (item, ``pay``); the table is unique per item and per vendor invoice number, so a cleared or
    retried task never pays twice. An invoice whose number was already paid for that vendor under
    another item goes to review instead.

    :param workflow: the invoice workflow.
    :param from_status: status of invoices to pay (default ``approved``).
    :param to_status: status after payment (default ``paid``).
    """

    ui_color = "#fdebd0"

    def __init__(
        self,
        *,
        from_status: str = "approved",
        to_status: str = "paid",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.from_status = from_status
        self.to_status = to_status

    def execute(self, context: Context) -> dict[str, Any]:
        from conveyor.ledger.store import ItemUpdate

        ledger = self.ledger()
        run_id = context["run_id"]
        actor = task_actor(context)
        items = ledger.items(workflow=self.workflow, run_id=run_id, status=self.from_status, limit=None)
        if not items:
            self.log.info("No approved invoices in run %s.", run_id)
            return {"paid": 0, "already_paid": 0, "duplicates": 0}
        claimed = set(ledger.claim_effects("pay", [i.item_id for i in items], actor=actor))
        rows, unpayable = [], {}
        for item in items:
            if item.item_id not in claimed:
                continue
            fields = item.ai_result or {}
            missing = [f for f in ("vendor_id", "invoice_number", "total") if fields.get(f) in (None, "")]
            if missing:
                unpayable[item.item_id] = ItemUpdate(reason=f"cannot pay: no {', '.join(missing)} extracted",
                                                     review_target=self.to_status)
                continue
            rows.append((item.item_id, str(fields.get("vendor_id")), str(fields.get("invoice_number")),
                         str(fields.get("total")), str(fields.get("currency") or "EUR"),
                         ledger.effect_key(item.item_id, "pay"), run_id))
        with ledger.connect() as conn:
            paid = conn.execute(
                """
                INSERT INTO conveyor.payments (item_id, vendor_id, invoice_number, amount, currency,
                                               idempotency_key, run_id)
                SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::numeric[], %s::text[],
                                     %s::text[], %s::text[])
                ON CONFLICT DO NOTHING
                RETURNING item_id
                """,
                [list(col) for col in zip(*rows, strict=True)] if rows else [[]] * 7,
            ).fetchall()
            paid_ids = {r[0] for r in paid}
            # Claimed but not inserted: paid by an earlier attempt (same item) or a duplicate invoice.
            existing = dict(
                conn.execute(
                    "SELECT item_id, invoice_number FROM conveyor.payments WHERE item_id = ANY(%s)",
                    ([r[0] for r in rows],),
                ).fetchall()
            )
        ledger.complete_effects("pay", {i: {"paid": True} for i in existing})
        if unpayable:
            ledger.transition(self.workflow, unpayable, to_status="pending_review", from_status=self.from_status,
                              actor=actor)
        duplicates = [r for r in rows if r[0] not in existing]
        if duplicates:
            ledger.transition(
                self.workflow,
                {r[0]: ItemUpdate(reason=f"invoice {r[2]} of vendor {r[1]} is already paid under another item",
                                  review_target=self.to_status) for r in duplicates},
                to_status="pending_review", from_status=self.from_status, actor=actor,
            )
        to_move = [i.item_id for i in items if i.item_id in existing or i.item_id not in claimed]
        ledger.transition(self.workflow, to_move, to_status=self.to_status, from_status=self.from_status,
                          actor=actor, reason="paid")
        summary = {"paid": len(paid_ids), "already_paid": len(to_move) - len(paid_ids),
                   "duplicates": len(duplicates), "unpayable": len(unpayable)}
        self.log.info("Payments of run %s: %s", run_id, summary)
        return summary


class ArchiveOperator(LedgerStepOperator):
    """Move each paid invoice's file from the inbox to the archive folder, then archive the item.

    Moving is idempotent: a file already in the archive (an earlier attempt) counts as moved.

    :param workflow: the invoice workflow.
    :param archive_dir: target folder (templated; default ``$CONVEYOR_HOME/archive/<workflow>``).
    :param path_field: payload field holding the file path.
    :param from_status: status of items to archive (default ``paid``).
    :param to_status: status after archiving (default ``archived``).
    """

    template_fields: Sequence[str] = ("archive_dir",)

    def __init__(
        self,
        *,
        archive_dir: str | None = None,
        path_field: str = "path",
        from_status: str = "paid",
        to_status: str = "archived",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.archive_dir = archive_dir
        self.path_field = path_field
        self.from_status = from_status
        self.to_status = to_status

    def execute(self, context: Context) -> dict[str, Any]:
        ledger = self.ledger()
        run_id = context["run_id"]
        items = ledger.items(workflow=self.workflow, run_id=run_id, status=self.from_status, limit=None)
        folder = Path(self.archive_dir or conveyor_home() / "archive" / self.workflow)
        folder.mkdir(parents=True, exist_ok=True)
        moved_files, missing = [], []
        for item in items:
            source = Path(str(item.payload.get(self.path_field, "")))
            target = folder / source.name
            if source.is_file():
                shutil.move(source, target)
                moved_files.append(item.item_id)
            elif not target.is_file():
                missing.append(f"{item.item_id} ({source})")
        if missing:
            raise AirflowFailException(
                f"{len(missing)} paid invoice file(s) are neither in the inbox nor in {folder}: "
                + ", ".join(missing[:5])
            )
        result = ledger.transition(
            self.workflow, [i.item_id for i in items], to_status=self.to_status, from_status=self.from_status,
            actor=task_actor(context), reason=f"archived to {folder}",
        )
        return {"archived": len(result.moved), "files_moved": len(moved_files), "archive_dir": str(folder)}
