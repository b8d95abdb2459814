"""Alerts about one run of a bundled workflow: a failed step, a missed deadline.

``alert_on_failure`` is the ``on_failure_callback`` of every task of the bundled DAGs: the
message says which step of which run failed, why (the task's own error, e.g. the gate's
"column 'supplier_id' missing; found 'vendor_id'"), and where to look. ``deadline_missed`` is
the callback of the DAGs' Deadline Alerts (run in the triggerer).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


def failure_message(context: Mapping[str, Any]) -> tuple[str, str]:
    """(subject, text) of a task failure, from an Airflow task context."""
    ti = context["ti"]
    run_id = context.get("run_id") or getattr(context.get("dag_run"), "run_id", "?")
    error = context.get("exception")
    reason = str(error).strip() if error else "no error message (see the task log)"
    subject = f"[Conveyor] {ti.dag_id}: step '{ti.task_id}' failed in run {run_id}"
    if _rejected_batch(error):
        # A rejected batch wrote no items: `conveyor items` would answer "no items match".
        first = f"  conveyor batches --workflow {ti.dag_id} --run '{run_id}'   (what the gate saw, and why it refused)"
    else:
        first = f"  conveyor items --workflow {ti.dag_id} --run '{run_id}'   (what happened to each item)"
    lines = [
        f"Workflow {ti.dag_id}, run {run_id}: the step '{ti.task_id}' failed (try {ti.try_number}).",
        f"Why: {reason}",
        "",
        "Where to look:",
        first,
        f"  conveyor queue --workflow {ti.dag_id}                     (items waiting for a person)",
    ]
    log_url = getattr(ti, "log_url", None)
    if log_url:
        lines.append(f"  task log: {log_url}")
    return subject, "\n".join(lines)


def failure_key(context: Mapping[str, Any]) -> str:
    """The one key of a task failure: the same try of the same task instance is one failure, however
    many Airflow components report it."""
    ti = context["ti"]
    run_id = context.get("run_id") or getattr(context.get("dag_run"), "run_id", "?")
    map_index = getattr(ti, "map_index", -1)
    return f"task-failure/{ti.dag_id}/{run_id}/{ti.task_id}/{map_index}/{ti.try_number}"


def _rejected_batch(error: BaseException | None) -> bool:
    """Whether the step failed because a gate refused its whole input (the gate raises its
    ``BatchRejected`` as the cause of the task's failure)."""
    from conveyor.gate.errors import BatchRejected

    seen = 0
    while error is not None and seen < 5:
        if isinstance(error, BatchRejected):
            return True
        error, seen = error.__cause__, seen + 1
    return False


def alert_on_failure(context: Mapping[str, Any]) -> None:
    """Tell a person that a step failed, once per failed try. Never raises: a broken alert channel is
    logged.

    A try is reported by whichever Airflow component sees the failure: the task's own process, and
    the scheduler when the worker was lost, sometimes both. The first to claim the failure's key in
    the ledger sends; the others stay quiet. With the ledger unreachable the alert goes out anyway:
    twice is better than never.
    """
    from conveyor.monitoring.notifiers import notify_people

    subject, text = failure_message(context)
    key = failure_key(context)
    claimed = _claim(key, subject)
    if claimed is False:
        log.info("failure alert already sent by another reporter of the same failure: %s", subject)
        return
    try:
        sent = notify_people(subject, text, context)
        log.info("failure alert sent on %s: %s", ", ".join(sent), subject)
    except Exception:
        log.exception("could not send the failure alert %r; its text was:\n%s", subject, text)
        if claimed:
            _release(key)


def _claim(key: str, subject: str) -> bool | None:
    """True: ours to send; False: already sent; None: the ledger cannot say (send anyway)."""
    import socket

    from conveyor.ledger import Ledger

    try:
        return Ledger(application_name="conveyor-alerts").claim_alert(key, subject, sent_by=socket.gethostname())
    except Exception as exc:  # no ledger here, or it is away: the person must still hear of it
        log.warning("cannot record the alert in the ledger (%s); sending it anyway", exc)
        return None


def _release(key: str) -> None:
    from conveyor.ledger import Ledger

    try:
        Ledger(application_name="conveyor-alerts").release_alert(key)
    except Exception as exc:
        log.warning("cannot release the alert's claim %s: %s", key, exc)


async def deadline_missed(workflow: str, deadline: str, context: Mapping[str, Any] | None = None,
                          **_: Any) -> None:
    """Deadline Alert callback: the run of ``workflow`` was not done by ``deadline``."""
    from conveyor.monitoring.notifiers import notify_people

    ctx = dict(context or {})
    run = ctx.get("dag_run")
    run_id = getattr(run, "run_id", None) or ctx.get("run_id") or "the current run"
    subject = f"[Conveyor] {workflow}: not done by {deadline}"
    text = (
        f"Workflow {workflow}, {run_id}, is not finished and its deadline ({deadline}) has passed.\n"
        f"Where to look: conveyor items --workflow {workflow}; conveyor queue --workflow {workflow}"
        " (a review queue nobody works is the usual cause)."
    )
    await asyncio.to_thread(notify_people, subject, text, ctx)
