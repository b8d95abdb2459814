"""The AI step operator: a model over a run's items, with guardrails, in one task instance.

Example (the task's offline model, an LLM one connection away)::

    from conveyor import AIStepOperator

    summarize = AIStepOperator(
        task_id="summarize",
        workflow=INSPECTIONS,                # the workflow's conveyor.Workflow declaration
        ai_task=SUMMARIZE,                   # an AITask
        model="local",                       # or a pydanticai connection id, a StepModel, "module:Class"
        fallback_model=None,                 # e.g. "local" behind an LLM
        min_confidence=0.7,
        max_failure_rate=0.1,
    )

Spread over several workers (dynamic task mapping: one task instance per shard, each claiming
chunks of the run's items from the ledger until none is left)::

    classify = AIStepOperator.partial(
        task_id="classify",
        workflow=INSPECTIONS,
        ai_task=CLASSIFY,
        model="conveyor_llm",
        pool="conveyor_llm",
        max_concurrency=8,                   # per shard
    ).expand(shard=list(range(4)))        # a list: Airflow would expand a range() as its text
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from conveyor.ai.models.resolve import LOCAL
from conveyor.ai.step_config import DEFAULTS, RETRY_FIELDS, TUNABLES, StepConfig, StepSettings, check_items_per_call
from conveyor.ledger_step import LedgerStepOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from conveyor.ai.definitions import AITask
    from conveyor.workflow import Workflow

#: The tunables' defaults are StepSettings' (the one place each is written); retries are its RetryPolicy's.
RETRY = DEFAULTS.retry

def _default_doc(has_fallback: bool, max_failure_rate: float) -> str:
    """The recovery line ``conveyor lint`` looks for, when the DAG author wrote no ``doc_md``."""
    from conveyor.recovery_doc import Recovery, recovery

    strategies = [Recovery.CIRCUIT_BREAKER, Recovery.RETRY]
    if has_fallback:
        strategies.append(Recovery.ALTERNATIVE_PATH)
    strategies += [Recovery.GRACEFUL_DEGRADATION, Recovery.MANUAL_INTERVENTION]
    return recovery(
        *strategies,
        why=(
            "transient model errors are retried per call and the shared breaker stops calls to a failing "
            f"endpoint{' (the fallback model answers meanwhile)' if has_fallback else ''}; the step succeeds "
            f"while at most {max_failure_rate:.0%} of items fail, failed and doubtful items wait in the "
            "review queue, and a retry or clear resumes with the unfinished items only."
        ),
        doc="AI step: a model over the run's items, checked (confidence, rule checks) before they move on.",
    )


class AIStepOperator(LedgerStepOperator):
    """Run an AI task over the run's items waiting in ``from_status``; route doubtful ones to review.

    Resumable: only items still in ``from_status`` are processed, results are committed chunk by
    chunk, and remote answers are cached by (model, prompt version, input hash), so a retry, a
    crash or a clear continues where the last attempt stopped and never pays for an answer twice.

    Recovery strategy: retry (per call, with backoff honouring ``Retry-After``; per task, via
    Airflow retries), circuit breaker (shared by every worker through the ledger database),
    alternative path (``fallback_model``), graceful degradation (``max_failure_rate``).

    :param workflow: the workflow of the items: its :class:`~conveyor.workflow.Workflow` (or stored name).
    :param ai_task: an :class:`~conveyor.ai.definitions.AITask` or the name of a registered one.
    :param model: ``"local"`` (the task's ``default_model``, offline, the default), the id of an
        Airflow connection of type ``pydanticai`` (an LLM), a :class:`~conveyor.ai.models.base.StepModel`
        (object, class or factory) or its ``"module:Class"`` path.
    :param fallback_model: the alternative path, same forms as ``model``: it answers the items the
        primary cannot (breaker open, retries exhausted). None: the step fails when the breaker is open.
    :param from_status: where the items wait (default: the task's, e.g. ``validated``).
    :param to_status: where passing items go (default: the task's, e.g. ``ai_processed``).
    :param min_confidence: items below it go to ``pending_review`` (an answer without confidence
        counts as below any threshold above 0).
    :param max_failure_rate: share of handled items that may fail (bad input, model errors) while
        the task still succeeds; above it the task fails with counts per reason.
    :param spot_check: share of the answers that passed every check sent to review anyway, drawn
        at random with a seed derived from the run and the item (a retry or clear draws the same
        items), e.g. ``0.02``. Shown on the review page as spot checks and counted apart from the
        exception rate; their decisions estimate the error rate of what passes unreviewed
        (``conveyor accuracy``). Default 0: none.
    :param max_error_rate: the declared target of that error rate (e.g. ``0.02``): ``workflow_health``
        alerts when its 95% upper bound exceeds it, and ``conveyor accuracy`` recommends the
        ``min_confidence`` that meets it. None (the default): no target.
    :param batch_size: items per chunk (one commit per chunk; at most one chunk's calls are
        repeated after a crash).
    :param max_concurrency: remote requests in flight at once.
    :param breaker_threshold: consecutive failed calls that open the endpoint's breaker.
    :param breaker_cooldown: seconds the breaker stays open before one probe call.
    :param call_timeout: seconds one request may take before it counts as a transient failure.
    :param max_attempts: attempts per call (the first included) for transient errors.
    :param backoff_base: seconds of the first backoff (exponential, full jitter).
    :param backoff_max: longest backoff between attempts without ``Retry-After``.
    :param max_retry_after: longest ``Retry-After`` honoured; a longer one ends the retries.
    :param confidence_method: for LLMs: ``logprobs`` (label token probability, no extra call),
        ``agreement`` (share of ``samples`` answers agreeing, k calls), or ``none``.
    :param samples: k for ``agreement``.
    :param repair_attempts: extra requests for an answer that fails schema validation.
    :param items_per_call: items sent to an LLM in one request (default 1; templated, e.g. from a
        Variable). More divides the per-request cost (client CPU, system-prompt tokens, rate-limit
        slots) by that number; an item whose answer in the batch is missing or invalid is asked
        again on its own. See :mod:`conveyor.ai.batching` for the trade-off.
    :param shard: None (the default): this task instance processes every waiting item of the run,
        as a list read at the start. Anything else (usually given by dynamic task mapping,
        ``AIStepOperator.partial(...).expand(shard=list(range(4)))``; pass a list, Airflow 3.3
        serialises a ``range`` to its text and would map over its characters) makes the task one
        of several shards of the step: it claims chunks of ``batch_size`` waiting items from the ledger
        (``FOR UPDATE SKIP LOCKED`` plus a lease of ``lease_seconds``, renewed while the chunk is
        worked on) until none is left, so N shards on N workers share the run's items, each item
        answered once. The value only labels the shard (in the summary and logs); the lease holder
        is the task instance (DAG, run, task, map index), so a retry of a shard re-takes its own
        leased items at once, and the chunks of a shard killed mid-way are taken over by a sibling
        (or its retry) once their lease expired. A shard that finds nothing left to claim waits
        while siblings hold live leases on waiting items (their chunk may be lost with them), then
        succeeds with zero items; a run with no items at all still fails. Counts, the XCom summary
        and ``max_failure_rate`` are per shard: each shard judges the items it handled (a shard
        above the rate fails alone, the items whose calls kept failing waiting for its retry or
        a sibling; what the other shards did stands). Per shard, not per step, because a shard
        cannot know its siblings' outcome when it ends, and one bad chunk fails one shard only. Each
        shard is a task instance of its own: ``max_concurrency`` bounds its own requests, and the
        ``pool`` (e.g. ``conveyor_llm``) and ``max_active_tis_per_dagrun`` bound how many shards
        run at once.
    :param lease_seconds: sharded: how long a claimed chunk stays this shard's without renewal
        (renewed every third of it while the task runs); after it, a killed shard's chunk is
        taken over. Longer than one chunk's worst case is not needed (renewal), shorter means a
        killed shard's items wait less.
    :param run_id: the run whose items to process (templated; default the DAG run's id).
    :param ledger_conn_id: the ledger's Airflow connection (default ``[conveyor] ledger_conn_id``).
    :return: (XCom) the summary: counts of items, passed, review, failed, reasons, calls, cache
        hits, fallback answers, raced (items a sibling moved first), seconds; sharded also the
        ``shard`` and the items it ``claimed``.
    """

    resumable = True  # only the run's items still waiting in its input status are worked on

    template_fields: Sequence[str] = (
        "run_id",
        "model",
        "fallback_model",
        "from_status",
        "to_status",
        "items_per_call",
    )
    ui_color = "#e8dff5"

    def __init__(
        self,
        *,
        workflow: str | Workflow,
        ai_task: AITask | str,
        model: Any = LOCAL,
        fallback_model: Any = None,
        from_status: str | None = None,
        to_status: str | None = None,
        min_confidence: float = DEFAULTS.min_confidence,
        max_failure_rate: float = DEFAULTS.max_failure_rate,
        spot_check: float = DEFAULTS.spot_check,
        max_error_rate: float | None = DEFAULTS.max_error_rate,
        batch_size: int = DEFAULTS.batch_size,
        max_concurrency: int = DEFAULTS.max_concurrency,
        breaker_threshold: int = DEFAULTS.breaker_threshold,
        breaker_cooldown: float = DEFAULTS.breaker_cooldown,
        call_timeout: float = DEFAULTS.call_timeout,
        max_attempts: int = RETRY.max_attempts,
        backoff_base: float = RETRY.backoff_base,
        backoff_max: float = RETRY.backoff_max,
        max_retry_after: float = RETRY.max_retry_after,
        confidence_method: str = DEFAULTS.confidence_method,
        samples: int = DEFAULTS.samples,
        repair_attempts: int = DEFAULTS.repair_attempts,
        items_per_call: int | str = 1,
        shard: Any = None,
        lease_seconds: float = DEFAULTS.lease_seconds,
        run_id: str = "{{ run_id }}",
        ledger_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        if not kwargs.get("doc_md"):
            kwargs["doc_md"] = _default_doc(fallback_model is not None, max_failure_rate)
        # A DAG with a setting no run could use fails to parse, naming it (StepSettings checks each).
        settings = StepSettings.of(locals())
        check_items_per_call(items_per_call)
        super().__init__(workflow=workflow, ledger_conn_id=ledger_conn_id, **kwargs)
        self.settings = settings
        self.ai_task = ai_task
        self.model = model
        self.fallback_model = fallback_model
        self.from_status = from_status
        self.to_status = to_status
        self.items_per_call = items_per_call
        self.shard = shard
        self.run_id = run_id

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowException, AirflowFailException

        from conveyor.ai.definitions import get_ai_task
        from conveyor.ai.errors import AIStepFailed
        from conveyor.ai.runner import run_step
        from conveyor.include import dag_file_folder, searching_near
        from conveyor.ledger.actors import task_actor
        from conveyor.ledger.leases import Holder
        from conveyor.templated import or_none

        try:  # a rendered template is a string
            items_per_call = int(self.items_per_call)
        except ValueError:
            items_per_call = 0
        if items_per_call < 1:
            raise AirflowFailException(
                f"items_per_call must be a whole number of at least 1, got {self.items_per_call!r}"
            )
        task = get_ai_task(self.ai_task)
        if task.workflow is not None and task.workflow != self.workflow:
            self.log.warning(
                "AI task %s is declared for workflow %r, used in %r.", task.name, task.workflow, self.workflow
            )
        run_id = self.run_id or context["run_id"]
        holder = None
        if self.shard is not None:
            ti = context["ti"]
            map_index = getattr(ti, "map_index", -1)
            who = map_index if map_index is not None and map_index >= 0 else f"shard={self.shard}"
            holder = Holder(name=f"{ti.dag_id}/{run_id}/{ti.task_id}/{who}", attempt=int(ti.try_number))
        config = StepConfig(
            workflow=self.workflow,
            run_id=run_id,
            task=task,
            actor=task_actor(context),
            from_status=self.from_status,
            to_status=self.to_status,
            model=self.model or "local",
            fallback_model=or_none(self.fallback_model),
            settings=self.settings,
            items_per_call=items_per_call,
            step=self.task_id,
            holder=holder,
            shard=self.shard,
        )
        ledger = self.ledger(context)
        # What its answers must be, for the API server to check a reviewer's correction of one.
        ledger.declare_ai_task(
            self.workflow, self.to_status or task.to_status, task.declaration(), actor=task_actor(context)
        )
        try:
            with searching_near(dag_file_folder(context)):
                summary = run_step(ledger, config)
        except AIStepFailed as exc:
            self.log.error("AI step summary: %s", exc.summary)
            if exc.retryable:
                raise AirflowException(str(exc)) from None
            raise AirflowFailException(str(exc)) from None
        self.log.info("AI step summary: %s", summary)
        return summary


def _tunable(name: str) -> property:
    """``task.<name>`` reads and writes the task's StepSettings: a cluster policy (or a test) that sets
    ``task.spot_check = 0.9`` changes what the run uses, checked like the keyword argument."""

    def get(self: AIStepOperator) -> Any:
        return getattr(self.settings.retry if name in RETRY_FIELDS else self.settings, name)

    def put(self: AIStepOperator, value: Any) -> None:
        self.settings = self.settings.replace(**{name: value})

    return property(get, put, doc=f"The step's ``{name}`` (held in :attr:`AIStepOperator.settings`).")


for _name in sorted(TUNABLES):
    setattr(AIStepOperator, _name, _tunable(_name))
