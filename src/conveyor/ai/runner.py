"""The AI step's engine: chunks of a run's items through a model, checked, committed, resumable.

For one workflow run and one :class:`~conveyor.ai.definitions.AITask`:

1. The items still in ``from_status`` are the work (the checkpoint: whatever an earlier attempt
   committed has moved on and is not seen again).
2. Items go in chunks of ``batch_size``. Each chunk's inputs are rendered and hashed; remote
   models answer from the result cache first, identical inputs are sent once, the rest go out
   with bounded concurrency through the endpoint's breaker and retry policy. When the primary's
   breaker is open (or its retries are exhausted) and a fallback is declared, the fallback
   answers those items.
3. New answers are written to the cache before anything moves, so a kill after that point costs
   no call again. Then every answer is checked (schema, confidence threshold, rule checks) and
   the chunk is committed: passing items to ``to_status``, the others to ``pending_review``
   with their reason and ``review_target = to_status``, each item's data and status change in
   one statement. The commit runs in a thread while the next chunk is being answered.
4. At the end, graceful degradation: items that failed permanently (bad input, a rejected
   request, output that never matched the schema) and items whose calls kept failing count as
   failures. Up to ``max_failure_rate`` of the handled items the step succeeds (failed items wait
   in review); above it the step fails with counts per reason, leaving transiently failed items
   in ``from_status`` for the retry. An open breaker with no fallback stops the step at once,
   with a message that says so.

Sharded (``StepConfig.holder`` set: one of several mapped task instances over the same run), step
1 changes: the chunks come one at a time from the ledger, claimed with a lease
(:class:`~conveyor.ai.sharding.ShardClaims`), instead of a list read at the start; a chunk's
leases are released once its items moved. Counts and ``max_failure_rate`` are per shard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from conveyor.ai.cache import CachedAnswer, ResultCache
from conveyor.ai.checks import run_checks
from conveyor.ai.confidence import distinct_figures
from conveyor.ai.definitions import AITask, InputError, ItemView
from conveyor.ai.errors import AIStepFailed, BreakerOpen, ModelCallError
from conveyor.ai.models.base import ModelInput, Prediction, StepModel
from conveyor.ai.retries import RetryPolicy
from conveyor.ai.sharding import ShardClaims
from conveyor.ai.spot_checks import (
    DEFAULT_MAX_ERROR_RATE,
    DEFAULT_SPOT_CHECK,
    check_settings,
    drawn,
    spot_reason,
    spot_seed,
)
from conveyor.ledger import item_reads
from conveyor.ledger.ai_labels import StepTally, bucket, routing_detail
from conveyor.ledger.faults import patiently
from conveyor.ledger.leases import Holder
from conveyor.ledger.statuses import Status
from conveyor.ledger.store import ItemUpdate, Ledger
from conveyor.ledger.values import problem_in

log = logging.getLogger(__name__)

LOCAL = "local"


@dataclass
class StepConfig:
    """Everything one run of the step needs (the operator's parameters, resolved).

    See :class:`~conveyor.ai.operators.AIStepOperator` for the meaning of each field.
    """

    workflow: str
    run_id: str
    task: AITask
    actor: str
    from_status: str | None = None
    to_status: str | None = None
    model: Any = LOCAL
    fallback_model: Any = None
    min_confidence: float = 0.7
    max_failure_rate: float = 0.1
    #: share of the answers that passed every check sent to review anyway (see ``conveyor.ai.spot_checks``)
    spot_check: float = DEFAULT_SPOT_CHECK
    #: the declared target of the error rate of what passes unreviewed (None: none declared)
    max_error_rate: float | None = DEFAULT_MAX_ERROR_RATE
    batch_size: int = 200
    max_concurrency: int = 8
    breaker_threshold: int = 5
    breaker_cooldown: float = 60.0
    breaker_poll_interval: float = 1.0
    call_timeout: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    confidence_method: str = "logprobs"
    samples: int = 3
    repair_attempts: int = 1
    items_per_call: int = 1
    step: str | None = None
    #: sharded: the task instance whose leases these are (None: the whole run in this process)
    holder: Holder | None = None
    #: sharded: the shard's own label, shown in the summary (e.g. its ``shard`` expand value)
    shard: Any = None
    #: sharded: seconds a claimed chunk stays this holder's without renewal
    lease_seconds: float = 300.0
    #: sharded: seconds between looks at the siblings' live leases once nothing is left to claim
    sibling_poll_interval: float = 1.0
    #: the spot checks' draw in this run (derived from the workflow, the run and the step)
    seed: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.from_status = self.from_status or self.task.from_status
        self.to_status = self.to_status or self.task.to_status
        self.step = self.step or self.task.name
        if not 0 <= self.min_confidence <= 1:
            raise ValueError("min_confidence must be between 0 and 1")
        if not 0 <= self.max_failure_rate <= 1:
            raise ValueError("max_failure_rate must be between 0 and 1")
        if self.batch_size < 1 or self.max_concurrency < 1 or self.items_per_call < 1:
            raise ValueError("batch_size, max_concurrency and items_per_call must be at least 1")
        if self.lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        check_settings(self.spot_check, self.max_error_rate)
        self.seed = spot_seed(self.workflow, self.run_id, self.step)


@dataclass
class _Outcome:
    """What one chunk came to, ready to commit."""

    passed: dict[str, ItemUpdate] = field(default_factory=dict)
    review: dict[str, ItemUpdate] = field(default_factory=dict)
    deferred: dict[str, ItemUpdate] = field(default_factory=dict)
    reasons: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    unprocessed: list[str] = field(default_factory=list)
    breaker: BreakerOpen | None = None
    #: the review items that are spot checks (they passed every check)
    spot: set[str] = field(default_factory=set)
    #: confidence of each answer that passed every check (spot checks included)
    passing_confidence: dict[str, float | None] = field(default_factory=dict)
    #: confidence of each answer routed for low confidence alone
    low_only_confidence: dict[str, float | None] = field(default_factory=dict)


def _chunks(seq: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(seq), size):
        yield seq[start : start + size]


class AIStepRunner:
    """Runs one AI step over one workflow run.

    :param ledger: the item ledger.
    :param config: the step's configuration.
    """

    def __init__(self, ledger: Ledger, config: StepConfig) -> None:
        self.ledger = ledger
        self.config = config
        self.task = config.task
        # StepConfig.__post_init__ fills these from the task; said once here for the type checker.
        assert config.from_status is not None and config.to_status is not None and config.step is not None
        self.cache = ResultCache(ledger)
        flow = ledger.workflow(config.workflow)
        for target in (config.to_status, Status.PENDING_REVIEW):
            if not flow.allows(config.from_status, target):
                raise ValueError(
                    f"workflow {config.workflow!r} does not allow {config.from_status!r} -> {target!r}"
                )
        self.primary = self.build_model(config.model)
        self.fallback = self.build_model(config.fallback_model) if config.fallback_model else None
        self.stats: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.deferred: dict[str, ItemUpdate] = {}
        self._pending_cache: dict[str, dict[str, CachedAnswer]] = {}
        self._cache_owner: dict[str, str] = {}
        self.claims: ShardClaims | None = None
        if config.holder is not None:
            self.claims = ShardClaims(
                ledger,
                workflow=config.workflow,
                run_id=config.run_id,
                status=config.from_status,
                step=config.step,
                holder=config.holder,
                batch_size=config.batch_size,
                lease_seconds=config.lease_seconds,
                poll_interval=config.sibling_poll_interval,
            )

    # -- models ------------------------------------------------------------------------------

    def build_model(self, spec: Any) -> StepModel:
        """The model ``spec`` names: see :mod:`conveyor.ai.models.resolve`."""
        from conveyor.ai.models.resolve import build_model

        return build_model(spec, self.task, self._llm)

    def _llm(self, conn_id: str) -> StepModel:
        from conveyor.ai.models.llm import LLMModel

        c = self.config
        return LLMModel(
            self.task,
            conn_id,
            ledger=self.ledger,
            max_concurrency=c.max_concurrency,
            call_timeout=c.call_timeout,
            retry=c.retry,
            breaker_threshold=c.breaker_threshold,
            breaker_cooldown=c.breaker_cooldown,
            breaker_poll_interval=c.breaker_poll_interval,
            confidence_method=c.confidence_method,
            samples=c.samples,
            repair_attempts=c.repair_attempts,
            items_per_call=c.items_per_call,
        )

    def close(self) -> None:
        for model in (self.primary, self.fallback):
            if model is not None:
                model.close()

    # -- reading the work --------------------------------------------------------------------

    def _load(self, item_ids: Sequence[str]) -> list[ItemView]:
        """The chunk's items that are still waiting (another worker may have moved some)."""
        status = self.config.from_status
        assert status is not None  # filled by StepConfig.__post_init__
        with self.ledger.connect() as conn:
            rows = item_reads.waiting_data(conn, item_ids, workflow=self.config.workflow, status=status)
        return [ItemView(item_id=item_id, payload=payload, ai_result=ai_result) for item_id, payload, ai_result in rows]

    def _render(self, views: Sequence[ItemView], hashed: bool) -> tuple[dict[str, ModelInput], dict[str, str]]:
        """Each item's model input, or why it cannot have one."""
        inputs: dict[str, ModelInput] = {}
        errors: dict[str, str] = {}
        for view in views:
            try:
                data, digest = self.task.model_input(view, hashed=hashed)
            except InputError as exc:
                errors[view.item_id] = str(exc)
                continue
            inputs[view.item_id] = ModelInput(item_id=view.item_id, data=data, input_hash=digest)
        return inputs, errors

    # -- answering a chunk -------------------------------------------------------------------

    async def _answer(self, model: StepModel, inputs: Sequence[ModelInput]) -> list[Prediction]:
        """Predictions in input order; remote models answer from the cache first, each input once."""
        if not model.remote:
            return await model.predict_many(inputs)
        version = self.task.version
        hashes = [i.input_hash for i in inputs]
        hits = await asyncio.to_thread(
            patiently, lambda: self.cache.get_many(model.key, version, hashes), what="reading the result cache"
        )
        first: dict[str, ModelInput] = {}
        for i in inputs:
            if i.input_hash not in hits:
                first.setdefault(i.input_hash, i)
        fresh = dict(zip(first, await model.predict_many(list(first.values())), strict=True))
        pending = self._pending_cache.setdefault(model.key, {})
        for h, p in fresh.items():
            # An answer jsonb cannot hold is not cached: it goes to review (see _judge), unbilled again.
            if p.output is not None and problem_in(p.output) is None and problem_in(p.detail) is None:
                pending[h] = CachedAnswer(output=p.output, confidence=p.confidence, detail=p.detail)
                self._cache_owner[h] = first[h].item_id
        out: list[Prediction] = []
        sent: set[str] = set()
        for i in inputs:
            if i.input_hash in hits:
                hit = hits[i.input_hash]
                out.append(
                    Prediction(
                        output=hit.output,
                        confidence=hit.confidence,
                        model=model.key,
                        cached=True,
                        detail=hit.detail,
                    )
                )
                continue
            p = fresh[i.input_hash]
            if i.input_hash in sent:  # a duplicate input in this chunk: same answer, no second call
                p = Prediction(
                    output=p.output,
                    confidence=p.confidence,
                    model=p.model,
                    calls=0,
                    cached=True,
                    error=p.error,
                    detail=p.detail,
                )
            sent.add(i.input_hash)
            out.append(p)
        return out

    async def _predict(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        predictions = await self._answer(self.primary, inputs)
        if self.fallback is None:
            return predictions
        redo = [
            n
            for n, p in enumerate(predictions)
            if isinstance(p.error, BreakerOpen) or (isinstance(p.error, ModelCallError) and p.error.transient)
        ]
        if redo:
            why = predictions[redo[0]].error
            log.warning("Fallback %s answers %d item(s): %s", self.fallback.key, len(redo), why)
            answers = await self._answer(self.fallback, [inputs[n] for n in redo])
            for n, answer in zip(redo, answers, strict=True):
                answer.calls += predictions[n].calls
                answer.detail = {
                    **answer.detail,
                    "fallback_from": self.primary.key,
                    "fallback_because": str(predictions[n].error)[:200],
                }
                predictions[n] = answer
                self.stats["fallback"] += 1
        return predictions

    def _flush_cache(self) -> None:
        for model_key, answers in self._pending_cache.items():
            if answers:
                owners = {h: self._cache_owner.get(h, "") for h in answers}
                self.cache.put_many(model_key, self.task.version, answers, owners)
        self._pending_cache.clear()
        self._cache_owner.clear()

    # -- judging answers ---------------------------------------------------------------------

    def _judge(
        self,
        views: Sequence[ItemView],
        inputs: dict[str, ModelInput],
        input_errors: dict[str, str],
        predictions: dict[str, Prediction],
    ) -> _Outcome:
        c = self.config
        step = c.step or self.task.name  # always set by StepConfig.__post_init__
        outcome = _Outcome()
        schema = self.task.output_schema
        for view in views:
            item_id = view.item_id
            if item_id in input_errors:
                reason = f"input cannot be sent to the model: {input_errors[item_id]}"
                outcome.review[item_id] = ItemUpdate(
                    reason=reason, last_error=reason, review_target=c.to_status, add_attempts=1
                )
                outcome.failures["input_error"] += 1
                continue
            p = predictions[item_id]
            self.stats["calls"] += p.calls
            self.stats["cache_hits"] += int(p.cached)
            if isinstance(p.error, BreakerOpen):
                outcome.unprocessed.append(item_id)
                outcome.breaker = p.error
                continue
            if isinstance(p.error, ModelCallError):
                update = ItemUpdate(
                    reason=f"model error: {p.error}",
                    last_error=str(p.error),
                    review_target=c.to_status,
                    add_attempts=1,
                )
                if p.error.transient:
                    outcome.deferred[item_id] = update
                    outcome.failures[f"unavailable:{p.error.code}"] += 1
                else:
                    outcome.review[item_id] = update
                    outcome.failures[p.error.code] += 1
                continue
            if p.error is not None or p.output is None:
                reason = f"model error: {p.error or 'no answer'}"
                outcome.review[item_id] = ItemUpdate(
                    reason=reason, last_error=reason, review_target=c.to_status, add_attempts=1
                )
                outcome.failures["no_answer"] += 1
                continue
            try:
                output = schema.model_validate(p.output).model_dump(mode="json")
            except Exception as exc:
                reason = (
                    f"model output does not match the {schema.__name__} schema: {str(exc).splitlines()[0]}"
                )
                outcome.review[item_id] = ItemUpdate(
                    reason=reason, last_error=reason, review_target=c.to_status, add_attempts=1
                )
                outcome.failures["invalid_output"] += 1
                continue
            unstorable = problem_in(output) or problem_in(p.confidence, "confidence")
            if unstorable:  # a NUL byte or NaN in the answer: a person looks, the ledger stays writable
                reason = f"model output cannot be stored: {unstorable}"
                outcome.review[item_id] = ItemUpdate(
                    reason=reason, last_error=reason, review_target=c.to_status, add_attempts=1
                )
                outcome.failures["invalid_output"] += 1
                continue
            failed = run_checks(self.task.checks, output, inputs[item_id].data)
            reasons = [reason for _, reason in failed]
            codes = [f"check:{code}" for code, _ in failed]
            label = (
                f" ({self.task.label_field} {output.get(self.task.label_field)!r})"
                if self.task.label_field
                else ""
            )
            if p.confidence is None and c.min_confidence > 0:
                reasons.insert(
                    0, f"the model reported no confidence{label}; threshold is {c.min_confidence:.2f}"
                )
                codes.insert(0, "no_confidence")
            elif p.confidence is not None and p.confidence < c.min_confidence:
                shown, bound = distinct_figures(p.confidence, c.min_confidence)
                reasons.insert(0, f"confidence {shown} is below the threshold {bound}{label}")
                codes.insert(0, "low_confidence")
            result = self.task.merge(view.ai_result, output)
            if reasons:
                outcome.review[item_id] = ItemUpdate(
                    reason="; ".join(reasons),
                    ai_result=result,
                    confidence=p.confidence,
                    review_target=c.to_status,
                    add_attempts=1,
                    detail=routing_detail(
                        step=step,
                        confidence=p.confidence,
                        failed_checks=codes,
                        spot_check=False,
                        share=1.0,
                    ),
                )
                outcome.reasons.update(codes)
                if codes == ["low_confidence"] or codes == ["no_confidence"]:
                    outcome.low_only_confidence[item_id] = p.confidence
            elif c.spot_check and drawn(c.seed, item_id, c.spot_check):
                outcome.passing_confidence[item_id] = p.confidence
                outcome.spot.add(item_id)
                outcome.review[item_id] = ItemUpdate(
                    reason=spot_reason(p.confidence, c.spot_check),
                    ai_result=result,
                    confidence=p.confidence,
                    review_target=c.to_status,
                    add_attempts=1,
                    detail=routing_detail(
                        step=step,
                        confidence=p.confidence,
                        failed_checks=(),
                        spot_check=True,
                        share=c.spot_check,
                        seed=c.seed,
                    ),
                )
            else:
                outcome.passing_confidence[item_id] = p.confidence
                via = f" via fallback {p.model}" if p.detail.get("fallback_from") else ""
                conf = f", confidence {p.confidence:.2f}" if p.confidence is not None else ""
                outcome.passed[item_id] = ItemUpdate(
                    reason=f"{self.task.name} by {p.model}{via}{conf}",
                    ai_result=result,
                    confidence=p.confidence,
                    add_attempts=1,
                )
        return outcome

    # -- committing --------------------------------------------------------------------------

    def _commit(self, outcome: _Outcome) -> None:
        c = self.config
        assert c.from_status is not None and c.to_status is not None  # filled by StepConfig.__post_init__
        moved: set[str] = set()
        for updates, target in ((outcome.passed, c.to_status), (outcome.review, Status.PENDING_REVIEW)):
            if not updates:
                continue
            result = self.ledger.transition(
                c.workflow, updates, to_status=target, from_status=c.from_status, actor=c.actor
            )
            moved.update(result.moved)
            self.stats["moved"] += len(result.moved)
            if result.not_moved:
                # Another worker moved them first (or this commit's own first try did, its
                # acknowledgement lost in a ledger restart): their result stands.
                self.stats["raced"] += len(result.not_moved)
                log.warning(
                    "%d item(s) were moved by someone else meanwhile: %s",
                    len(result.not_moved),
                    list(result.not_moved)[:5],
                )
        if moved:
            # Only what this commit moved: a commit repeated after a lost acknowledgement moves
            # nothing and counts nothing twice.
            self.ledger.record_ai_tallies([self._tally_of(outcome, moved)])
        if self.claims is not None:  # moved (or raced): no sibling would claim them, the lease is moot
            self.claims.release([*outcome.passed, *outcome.review])

    def _tally_of(self, outcome: _Outcome, moved: set[str]) -> StepTally:
        """What the moved items of a chunk count for the accuracy estimate."""
        c = self.config
        step = c.step or self.task.name  # always set by StepConfig.__post_init__
        tally = StepTally(
            workflow=c.workflow,
            step=step,
            run_id=c.run_id,
            min_confidence=c.min_confidence,
            spot_check=c.spot_check,
            max_error_rate=c.max_error_rate,
            seed=c.seed,
            passed=sum(1 for i in outcome.passed if i in moved),
            spot_checked=sum(1 for i in outcome.spot if i in moved),
            exceptions=sum(1 for i in outcome.review if i in moved and i not in outcome.spot),
        )
        for confidences, histogram in (
            (outcome.passing_confidence, tally.passed_by_confidence),
            (outcome.low_only_confidence, tally.low_only_by_confidence),
        ):
            for item_id, confidence in confidences.items():
                if item_id in moved:
                    histogram[bucket(confidence)] += 1
        return tally

    def _commit_patiently(self, outcome: _Outcome, chunk: int | str) -> None:
        """Commit, waiting out a ledger restart: each move is guarded by ``from_status``, so a
        commit whose acknowledgement was lost moves nothing the second time (its items count as
        raced) and no answer is ever lost or paid for twice."""
        patiently(lambda: self._commit(outcome), what=f"committing chunk {chunk}")

    # -- the run -----------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        """Process the run's waiting items; return the summary or raise :class:`AIStepFailed`."""
        c = self.config
        from_status = c.from_status
        assert from_status is not None  # filled by StepConfig.__post_init__
        started = time.monotonic()
        ids: list[str] | None = None
        first: list[ItemView] | None = None
        claims = self.claims
        if claims is None:
            ids = await asyncio.to_thread(
                patiently,
                lambda: self.ledger.item_ids(workflow=c.workflow, run_id=c.run_id, status=from_status),
                what="listing the run's waiting items",
            )
        else:
            first = await asyncio.to_thread(claims.next_chunk, self._load)
        if not ids and first is None:
            counts = await asyncio.to_thread(
                self.ledger.count_by_status, workflow=c.workflow, run_id=c.run_id
            )
            if not counts:
                raise AIStepFailed(
                    f"run {c.run_id!r} of workflow {c.workflow!r} has no items in the ledger at all: "
                    f"the steps before {c.step} produced nothing, so there is nothing to process "
                    f"(an empty input is a failure)",
                    summary=self.summary(started),
                    retryable=False,
                )
            log.info(
                "No items of run %s wait in %r%s (already processed: %s).",
                c.run_id,
                c.from_status,
                "" if claims is None else " for this shard (its siblings took them)",
                counts,
            )
            return self.summary(started)
        log.info(
            "%s: %s of run %s in %r, chunks of %d, model %s%s.",
            c.step,
            f"{len(ids)} item(s)" if ids is not None else f"shard {c.shard!r} ({c.holder}) claiming item(s)",
            c.run_id,
            c.from_status,
            c.batch_size,
            self.primary.key,
            f", fallback {self.fallback.key}" if self.fallback else "",
        )
        committing: asyncio.Task[None] | None = None
        breaker: BreakerOpen | None = None
        # Only remote answers are cached; a local model is cheaper to run than to look up.
        hashed = self.primary.remote or (self.fallback is not None and self.fallback.remote)
        chunks = list(_chunks(ids, c.batch_size)) if ids is not None else []

        async def claimed_first() -> list[ItemView] | None:
            return first

        def read(n: int) -> asyncio.Task[list[ItemView] | None] | None:
            if claims is not None:  # sharded: the next chunk is whatever the ledger hands this shard
                return asyncio.create_task(
                    claimed_first() if n == 0 else asyncio.to_thread(claims.next_chunk, self._load)
                )
            if n >= len(chunks):
                return None
            return asyncio.create_task(
                asyncio.to_thread(patiently, lambda: self._load(chunks[n]), what=f"reading chunk {n + 1}")
            )

        # The next chunk is read while this one is answered, judged and committed: the ledger's
        # round trip and the payloads' JSON parsing overlap the model's work.
        loading = read(0)
        renewing = asyncio.create_task(claims.keep()) if claims is not None else None
        number = 0
        try:
            while loading is not None:
                views = await loading
                loading = None
                if views is None:  # sharded: nothing left to claim
                    break
                number += 1
                loading = read(number)
                # Off the event loop: a task's render may read files (object storage's clients run an
                # event loop of their own and cannot be called from inside this one).
                inputs, input_errors = await asyncio.to_thread(self._render, views, hashed)
                answers = await self._predict(list(inputs.values()))
                predictions = dict(zip(inputs, answers, strict=True))
                # Before anything moves: never paid twice. An upsert, so it may wait for the ledger.
                await asyncio.to_thread(patiently, self._flush_cache, what="writing the result cache")
                outcome = self._judge(views, inputs, input_errors, predictions)
                self._tally(outcome)
                if committing is not None:
                    await committing
                committing = asyncio.create_task(asyncio.to_thread(self._commit_patiently, outcome, number))
                log.info(
                    "chunk %d: %d item(s): %d passed, %d to review, %d deferred, %d not processed; "
                    "%d call(s) so far, %d cache hit(s).",
                    number,
                    len(views),
                    len(outcome.passed),
                    len(outcome.review),
                    len(outcome.deferred),
                    len(outcome.unprocessed),
                    self.stats["calls"],
                    self.stats["cache_hits"],
                )
                if outcome.breaker is not None:
                    breaker = outcome.breaker
                    break
        finally:
            if claims is not None:
                claims.stop()
            if loading is not None:  # stopped early: the read ahead is not needed
                if claims is None:
                    loading.cancel()
                # Sharded, the claim's thread is let finish (it stops at once), so that its leases
                # are released below rather than left to expire.
                await asyncio.gather(loading, return_exceptions=True)
            if committing is not None:
                await committing
            if renewing is not None:
                renewing.cancel()
                await asyncio.gather(renewing, return_exceptions=True)
        try:
            if breaker is not None:
                if ids is not None:
                    waiting = len(ids) - self.stats["handled"]
                else:
                    counts = await asyncio.to_thread(
                        self.ledger.count_by_status, workflow=c.workflow, run_id=c.run_id
                    )
                    waiting = counts.get(from_status, 0)
                raise AIStepFailed(
                    f"{breaker}. No fallback model is declared, so the step stopped calling it: "
                    f"{waiting} item(s) stay in {c.from_status!r} for the retry (retry after the cool-down); "
                    f"{self._counts_text()}",
                    summary=self.summary(started, breaker=str(breaker)),
                    retryable=True,
                )
            return await self._finish(started)
        finally:
            if claims is not None:  # what is left (deferred items, a stopped claim) is free again
                await asyncio.to_thread(claims.release)

    def _tally(self, outcome: _Outcome) -> None:
        self.stats["passed"] += len(outcome.passed)
        # Spot checks are counted apart: they passed, and are no exception.
        self.stats["review"] += len(outcome.review) - len(outcome.spot)
        self.stats["spot_checked"] += len(outcome.spot)
        self.stats["handled"] += len(outcome.passed) + len(outcome.review) + len(outcome.deferred)
        self.reasons.update(outcome.reasons)
        self.failures.update(outcome.failures)
        self.deferred.update(outcome.deferred)

    async def _finish(self, started: float) -> dict[str, Any]:
        c = self.config
        handled = self.stats["handled"]
        failed = sum(self.failures.values())
        rate = failed / handled if handled else 0.0
        if rate > c.max_failure_rate:
            retryable = bool(self.deferred)
            left = (
                f"; {len(self.deferred)} item(s) whose calls kept failing stay in {c.from_status!r} "
                f"for the retry"
                if self.deferred
                else "; the failed items wait in review, so a retry would not help"
            )
            raise AIStepFailed(
                f"{failed} of {handled} item(s) failed "
                f"({rate:.0%}, above max_failure_rate {c.max_failure_rate:.0%}): "
                f"{', '.join(f'{n} {code}' for code, n in self.failures.most_common())}{left}",
                summary=self.summary(started),
                retryable=retryable,
            )
        if self.deferred:
            # Tolerated: the few items the model never answered go to a person, not back to waiting.
            await asyncio.to_thread(self._commit_patiently, _Outcome(review=self.deferred), "of deferred items")
            self.stats["review"] += len(self.deferred)
        return self.summary(started)

    def _counts_text(self) -> str:
        return (
            f"{self.stats['passed']} passed, {self.stats['review']} to review, "
            f"{sum(self.failures.values())} failed so far"
        )

    def summary(self, started: float, **extra: Any) -> dict[str, Any]:
        """The small dict the task pushes to XCom."""
        c = self.config
        return {
            "workflow": c.workflow,
            "run_id": c.run_id,
            "step": c.step,
            "model": self.primary.key,
            "fallback_model": self.fallback.key if self.fallback else None,
            "from_status": c.from_status,
            "to_status": c.to_status,
            "items": self.stats["handled"],
            "passed": self.stats["passed"],
            "review": self.stats["review"],
            "spot_checked": self.stats["spot_checked"],
            "spot_check": c.spot_check,
            "spot_seed": c.seed,
            "failed": sum(self.failures.values()),
            "review_reasons": dict(self.reasons.most_common()),
            "failure_reasons": dict(self.failures.most_common()),
            "calls": self.stats["calls"],
            "cache_hits": self.stats["cache_hits"],
            "fallback_used": self.stats["fallback"],
            "raced": self.stats["raced"],
            **({} if self.claims is None else {"shard": c.shard, "claimed": self.claims.claimed}),
            "seconds": round(time.monotonic() - started, 3),
            **extra,
        }


def run_step(ledger: Ledger, config: StepConfig) -> dict[str, Any]:
    """Run the step to completion in a fresh event loop (what the operator calls)."""
    runner = AIStepRunner(ledger, config)
    try:
        return asyncio.run(runner.run())
    finally:
        runner.close()
