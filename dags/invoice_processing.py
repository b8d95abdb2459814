"""invoice_processing: invoices from an inbox folder to payment and archive, each paid once.

    intake ─ extract_fields ─ review_extractions ─ validate ─ review_invalid ─ classify_spend
           ─ route_approvals ─ review_approvals ─ pay ─ archive

The model reads each invoice; a person checks what it could not read well. The gate checks the
extracted data (line items add up to the total, plausible dates, known vendor, no duplicate
invoice number). Amounts over the approval threshold (Variable
``conveyor_invoice_approval_threshold``) need a person's approval, doubtful classifications a
review. Payment goes through an idempotency key per invoice: clearing a task never pays twice.

The inbox is the DAG param ``inbox_path`` or, for scheduled runs, the Variable
``conveyor_invoice_inbox`` (a URL, or a path under ``[conveyor] storage_base``). An empty inbox
is a quiet hour: the run is skipped, nobody is paged. A missing or unreadable inbox fails the run
naming it. Invoices arrive as text, CSV, JSON or PDF (read through its text layer); a scanned PDF
or a file of another type is held for a person with the reason, never left in the inbox.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from conveyor import (
    AIStepOperator,
    ApprovalRoutingOperator,
    ArchiveOperator,
    HumanReviewSensor,
    InboxIntakeOperator,
    Recovery,
    ValidationGateOperator,
    default_args,
    recovery,
)
from conveyor_examples.invoices import CLASSIFY_SPEND, EXTRACT_FIELDS, PayInvoicesOperator
from conveyor_examples.invoices import INVOICES as WORKFLOW

INBOX = "{{ params.inbox_path or var.value.get('conveyor_invoice_inbox', 'inbox/invoice_processing') }}"
MODEL = "{{ var.value.get('conveyor_invoice_model', 'local') }}"


def review(task_id: str, why: str) -> HumanReviewSensor:
    """A point where the run waits for people (deferred: no worker slot held while it waits)."""
    return HumanReviewSensor(
        task_id=task_id,
        workflow=WORKFLOW,
        escalation="proceed",  # undecided invoices stay on the queue; clearing the run resumes them
        timeout=int(timedelta(hours=4).total_seconds()),
        # An invoice nobody has looked at for an hour: a person is told which one, it keeps waiting.
        item_timeout=timedelta(hours=1),
        item_escalation="alert",
        doc_md=recovery(Recovery.MANUAL_INTERVENTION, Recovery.GRACEFUL_DEGRADATION, why=why),
    )


with DAG(
    dag_id=WORKFLOW.name,
    description="Invoices: AI extraction, validation, spend classification, approval, payment, archive",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=default_args(),
    params={
        "inbox_path": Param(None, type=["null", "string"],
                            description="Folder the invoices land in (text, CSV, JSON or PDF, one per file): a URL or "
                                        "a path under [conveyor] storage_base. Empty: the Variable "
                                        "conveyor_invoice_inbox."),
    },
    doc_md=__doc__,
    tags=["conveyor", "finance"],
) as dag:
    intake = InboxIntakeOperator(
        task_id="intake", workflow=WORKFLOW, inbox_path=INBOX,
        doc_md=recovery(Recovery.RETRY, why="a folder on a flaky share reads on the next try; an empty inbox "
                        "is a quiet hour (skipped), a missing one fails naming it"),
    )
    extract_fields = AIStepOperator(
        task_id="extract_fields",
        workflow=WORKFLOW,
        ai_task=EXTRACT_FIELDS,
        model=MODEL,
        fallback_model="local",
        min_confidence=0.8,
        spot_check=0.02,  # a reviewer checks 2% of confident extractions: what passes unreviewed, measured
        max_error_rate=0.02,  # a wrong total is a wrong payment: alert above 2% (conveyor accuracy)
        max_failure_rate=0.2,
        doc_md=recovery(Recovery.RETRY, Recovery.CIRCUIT_BREAKER, Recovery.ALTERNATIVE_PATH,
                        Recovery.GRACEFUL_DEGRADATION,
                        why="calls retry with backoff behind a shared breaker, the local extractor answers "
                            "instead, and unreadable invoices (up to 20%) go to a person"),
    )
    review_extractions = review("review_extractions", why="a person checks invoices the model could not read "
                                "well before they are validated")
    validate = ValidationGateOperator(
        task_id="validate",
        workflow=WORKFLOW,
        suite="invoice_fields",
        source="ledger",  # the fields extract_fields wrote: extracted -> validated | quarantined
        max_exception_rate=0.3,
        doc_md=recovery(Recovery.MANUAL_INTERVENTION, Recovery.RETRY,
                        why="an invoice whose numbers do not add up is quarantined for a person (a bad batch "
                            "fails at once, without retries); a ledger outage is retried"),
    )
    review_invalid = review("review_invalid", why="a person accepts or rejects invoices that failed validation")
    classify_spend = AIStepOperator(
        task_id="classify_spend",
        workflow=WORKFLOW,
        ai_task=CLASSIFY_SPEND,
        model=MODEL,
        fallback_model="local",
        items_per_call="{{ var.value.get('conveyor_llm_items_per_call', 1) }}",
        min_confidence=0.0,  # doubtful categories are sent to a person by route_approvals
        max_failure_rate=0.1,
        doc_md=recovery(Recovery.RETRY, Recovery.CIRCUIT_BREAKER, Recovery.ALTERNATIVE_PATH,
                        why="as extract_fields: backoff, shared breaker, local model as the fallback"),
    )
    route_approvals = ApprovalRoutingOperator(
        task_id="route_approvals",
        workflow=WORKFLOW,
        from_status="classified",
        amount_field="total",
        threshold="{{ var.value.get('conveyor_invoice_approval_threshold', 5000) }}",
        min_confidence=0.55,  # measured: spend categories above 0.55 were all right on the sample day
        doc_md=recovery(Recovery.RETRY, why="one guarded ledger write per outcome; a retry moves nothing twice"),
    )
    review_approvals = review("review_approvals", why="a person approves large or doubtful invoices before "
                              "payment")
    pay = PayInvoicesOperator(
        task_id="pay", workflow=WORKFLOW, from_status="approved", to_status="paid", reason="paid",
        doc_md=recovery(Recovery.RETRY, why="each payment carries its invoice's idempotency key: a retry or a "
                        "clear never pays twice"),
    )
    archive = ArchiveOperator(
        task_id="archive", workflow=WORKFLOW, from_status="paid", to_status="archived",
        doc_md=recovery(Recovery.RETRY, why="moving a file already archived counts as done"),
    )

    (intake >> extract_fields >> review_extractions >> validate >> review_invalid >> classify_spend
     >> route_approvals >> review_approvals >> pay >> archive)
