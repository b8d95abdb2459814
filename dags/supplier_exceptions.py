"""supplier_exceptions: the daily supplier-exception report for procurement, due by 08:00.

    extract ─ validate ─ review_inputs ─ classify_and_draft ─ review_drafts ─ director_signoff
            ─ approve_items ─ publish_report

Bad input never reaches the model: the gate fails the run on a renamed column, an empty, stale or
re-sent feed, and quarantines bad rows for a person; a row a reviewer corrects is validated again
by the same suite and goes on in the same run. Doubtful drafts go to the review queue (a reviewer
may rewrite one). The director signs the report off in Airflow's own approval step, seeing how many
items it approves and a preview of the report; a Reject fails the run, naming who and why, and
alerts a person. Nothing blank is ever published.

The extract is read from the DAG param ``extract_path`` or, for scheduled runs, the Variable
``conveyor_supplier_extract`` (a URL, or a path under ``[conveyor] storage_base``).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param
from airflow.sdk.definitions.callback import AsyncCallback
from airflow.sdk.definitions.deadline import DeadlineAlert

from conveyor import (
    RUN_QUEUED_AT,
    AIStepOperator,
    HumanReviewSensor,
    PromoteItemsOperator,
    PublishOperator,
    Recovery,
    SignOffOperator,
    SnapshotExtractOperator,
    ValidationGateOperator,
    deadline_missed,
    default_args,
    recovery,
)
from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION
from conveyor_examples.supplier_exceptions import SUPPLIER_EXCEPTIONS as WORKFLOW

EXTRACT = (
    "{{ params.extract_path or var.value.get('conveyor_supplier_extract', 'feeds/supplier_exceptions/extract.csv') }}"
)

with DAG(
    dag_id=WORKFLOW.name,
    description="Daily supplier-exception report: gate, AI drafting, review, sign-off, publish",
    schedule="0 6 * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=default_args(),
    params={
        "extract_path": Param(None, type=["null", "string"],
                              description="This run's extract (CSV, JSON lines or Parquet): a URL or a path under "
                                          "[conveyor] storage_base. Empty: the Variable conveyor_supplier_extract."),
        # A feed that stopped being refreshed upstream still parses: without this, last month's
        # exceptions would be reported again as today's.
        "max_age_days": Param(2, type=["integer", "null"],
                              description="Fail the run when the newest exception_date is older than this "
                                          "many days before the run (null: no freshness check)."),
    },
    # The report is due at 08:00, two hours after the 06:00 run was queued: tell a person when not.
    # RUN_QUEUED_AT is DAGRUN_QUEUED_AT under a name Airflow 3.3.2's clear does not trip over.
    deadline=DeadlineAlert(
        reference=RUN_QUEUED_AT,
        interval=timedelta(hours=2),
        callback=AsyncCallback(deadline_missed, kwargs={"workflow": WORKFLOW.name, "deadline": "08:00"}),
    ),
    doc_md=__doc__,
    tags=["conveyor", "procurement"],
) as dag:
    extract = SnapshotExtractOperator(
        task_id="extract", workflow=WORKFLOW, source=EXTRACT,
        doc_md=recovery(Recovery.RETRY, why="a feed file still being written shows up on the next try"),
    )
    validate = ValidationGateOperator(
        task_id="validate",
        workflow=WORKFLOW,
        suite="supplier_exceptions",
        source="{{ ti.xcom_pull(task_ids='extract') }}",
        max_age="{{ params.max_age_days }}",
        max_exception_rate=0.2,  # more than 1 row in 5 failing: the feed is broken, fail the run
        doc_md=recovery(Recovery.MANUAL_INTERVENTION, Recovery.RETRY,
                        why="bad data fails the run at once, without retries: fix the feed and clear the task; "
                            "bad rows wait on the review queue. A ledger outage is retried"),
    )
    review_inputs = HumanReviewSensor(
        task_id="review_inputs",
        workflow=WORKFLOW,
        escalation="proceed",  # undecided rows stay quarantined, out of this report
        timeout=int(timedelta(minutes=30).total_seconds()),
        doc_md=recovery(Recovery.MANUAL_INTERVENTION, Recovery.GRACEFUL_DEGRADATION,
                        why="a person accepts or rejects quarantined rows; after 30 min the report goes on "
                            "without them"),
    )
    classify_and_draft = AIStepOperator(
        task_id="classify_and_draft",
        workflow=WORKFLOW,
        ai_task=CLASSIFY_EXCEPTION,
        model="{{ var.value.get('conveyor_supplier_model', 'local') }}",
        fallback_model="local",
        items_per_call="{{ var.value.get('conveyor_llm_items_per_call', 1) }}",
        # Measured on the sample day: the offline classifier's answers above 0.5 are as often right
        # (98%) as those above 0.7, so 0.5 sends ~9% to a person instead of 27% without losing accuracy.
        min_confidence=0.5,
        # The threshold measured: 2% of the drafts that pass go to a reviewer anyway, and
        # workflow_health alerts when what passes unreviewed may be wrong more than 5% of the time
        # (conveyor accuracy --workflow supplier_exceptions shows the estimate and the curve).
        spot_check=0.02,
        max_error_rate=0.05,
        max_failure_rate=0.1,
        doc_md=recovery(Recovery.RETRY, Recovery.CIRCUIT_BREAKER, Recovery.ALTERNATIVE_PATH,
                        Recovery.GRACEFUL_DEGRADATION,
                        why="calls retry with backoff, a shared breaker stops hammering a failing model, the "
                            "local model answers instead, and up to 10% failed items are routed to review"),
    )
    review_drafts = HumanReviewSensor(
        task_id="review_drafts",
        workflow=WORKFLOW,
        escalation="proceed",  # doubtful drafts nobody checked stay out of the report
        timeout=int(timedelta(minutes=45).total_seconds()),
        doc_md=recovery(Recovery.MANUAL_INTERVENTION, Recovery.GRACEFUL_DEGRADATION,
                        why="reviewers check doubtful drafts; after 45 min the report goes on with the "
                            "confident ones"),
    )
    director_signoff = SignOffOperator(
        task_id="director_signoff",
        workflow=WORKFLOW,
        status="ai_processed",  # the drafts approve_items promotes
        preview="publish_report",  # the report as publish_report will render it
        subject="Supplier exception report of {{ dag_run.run_after | ds }}: approve for procurement?",
        body="The drafted report of run `{{ run_id }}` is ready. Approve to publish it to procurement; "
             "reject (with a reason) to stop the run: nothing is published and a person is alerted.",
        response_timeout=timedelta(hours=1),
        doc_md=recovery(Recovery.MANUAL_INTERVENTION, why="the director signs off; a rejection fails the run "
                        "with who and why; the 08:00 deadline alert tells a person when nobody has"),
    )
    approve_items = PromoteItemsOperator(
        task_id="approve_items",
        workflow=WORKFLOW,
        from_status="ai_processed",
        to_status="approved",
        reason="signed off by the director",
        doc_md=recovery(Recovery.RETRY, why="one guarded ledger write; a retry moves nothing twice"),
    )
    publish_report = PublishOperator(
        task_id="publish_report",
        workflow=WORKFLOW,
        templates=["conveyor_examples/supplier_report.md.j2", "conveyor_examples/supplier_report.html.j2"],
        title="Supplier exceptions {{ dag_run.run_after | ds }}",
        recipients=["procurement@example.com"],
        required_fields=["ai_result.draft"],
        doc_md=recovery(Recovery.RETRY, why="the report's outbox record makes publishing idempotent; a blank "
                        "report fails instead of going out"),
    )

    (extract >> validate >> review_inputs >> classify_and_draft >> review_drafts >> director_signoff
     >> approve_items >> publish_report)
