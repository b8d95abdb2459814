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
from typing import Any

from conveyor.ai.answering import StepModels
from conveyor.ai.committing import ChunkCommitter
from conveyor.ai.definitions import InputError, ItemView
from conveyor.ai.errors import AIStepFailed, BreakerOpen
from conveyor.ai.judging import ChunkOutcome, judge_chunk
from conveyor.ai.models.base import ModelInput
from conveyor.ai.sharding import ShardClaims
from conveyor.ai.step_config import StepConfig as StepConfig
from conveyor.ai.summary import AIStepSummary
from conveyor.ledger import item_reads
from conveyor.ledger.faults import patiently
from conveyor.ledger.statuses import Status
from conveyor.ledger.store import ItemUpdate, Ledger

log = logging.getLogger(__name__)


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
        flow = ledger.workflow(config.workflow)
        for target in (config.to_status, Status.PENDING_REVIEW):
            if not flow.allows(config.from_status, target):
                raise ValueError(f"workflow {config.workflow!r} does not allow {config.from_status!r} -> {target!r}")
        self.models = StepModels(ledger, config)
        self.primary = self.models.primary
        self.fallback = self.models.fallback
        self.stats: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.deferred: dict[str, ItemUpdate] = {}
        self.claims: ShardClaims | None = None
        if config.holder is not None:
            self.claims = ShardClaims(
                ledger,
                workflow=config.workflow,
                run_id=config.run_id,
                status=config.from_status,
                step=config.step,
                holder=config.holder,
                batch_size=config.settings.batch_size,
                lease_seconds=config.settings.lease_seconds,
                poll_interval=config.sibling_poll_interval,
            )
        self.committer = ChunkCommitter(ledger, config, self.claims)

    def close(self) -> None:
        self.models.close()

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
            counts = await asyncio.to_thread(self.ledger.count_by_status, workflow=c.workflow, run_id=c.run_id)
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
            c.settings.batch_size,
            self.primary.key,
            f", fallback {self.fallback.key}" if self.fallback else "",
        )
        committing: asyncio.Task[None] | None = None
        breaker: BreakerOpen | None = None
        hashed = self.models.hashed
        chunks = list(_chunks(ids, c.settings.batch_size)) if ids is not None else []

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
                answers = await self.models.predict(list(inputs.values()))
                predictions = dict(zip(inputs, answers, strict=True))
                # Before anything moves: never paid twice. An upsert, so it may wait for the ledger.
                await asyncio.to_thread(patiently, self.models.flush_cache, what="writing the result cache")
                outcome = judge_chunk(self.task, c, views, inputs, input_errors, predictions)
                self._tally(outcome)
                if committing is not None:
                    await committing
                committing = asyncio.create_task(asyncio.to_thread(self.committer.commit_patiently, outcome, number))
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
                    counts = await asyncio.to_thread(self.ledger.count_by_status, workflow=c.workflow, run_id=c.run_id)
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

    def _tally(self, outcome: ChunkOutcome) -> None:
        self.stats["calls"] += outcome.calls
        self.stats["cache_hits"] += outcome.cache_hits
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
        if rate > c.settings.max_failure_rate:
            retryable = bool(self.deferred)
            left = (
                f"; {len(self.deferred)} item(s) whose calls kept failing stay in {c.from_status!r} for the retry"
                if self.deferred
                else "; the failed items wait in review, so a retry would not help"
            )
            raise AIStepFailed(
                f"{failed} of {handled} item(s) failed "
                f"({rate:.0%}, above max_failure_rate {c.settings.max_failure_rate:.0%}): "
                f"{', '.join(f'{n} {code}' for code, n in self.failures.most_common())}{left}",
                summary=self.summary(started),
                retryable=retryable,
            )
        if self.deferred:
            # Tolerated: the few items the model never answered go to a person, not back to waiting.
            await asyncio.to_thread(
                self.committer.commit_patiently, ChunkOutcome(review=self.deferred), "of deferred items"
            )
            self.stats["review"] += len(self.deferred)
        return self.summary(started)

    def _counts_text(self) -> str:
        return (
            f"{self.stats['passed']} passed, {self.stats['review']} to review, "
            f"{sum(self.failures.values())} failed so far"
        )

    def summary(self, started: float, *, breaker: str | None = None) -> dict[str, Any]:
        """The task's XCom (see :class:`~conveyor.ai.summary.AIStepSummary`)."""
        c = self.config
        return AIStepSummary(
            workflow=c.workflow,
            run_id=c.run_id,
            step=c.step,
            model=self.primary.key,
            fallback_model=self.fallback.key if self.fallback else None,
            from_status=c.from_status,
            to_status=c.to_status,
            items=self.stats["handled"],
            passed=self.stats["passed"],
            review=self.stats["review"],
            spot_checked=self.stats["spot_checked"],
            spot_check=c.settings.spot_check,
            spot_seed=c.seed,
            failed=sum(self.failures.values()),
            review_reasons=dict(self.reasons.most_common()),
            failure_reasons=dict(self.failures.most_common()),
            calls=self.stats["calls"],
            cache_hits=self.stats["cache_hits"],
            fallback_used=self.models.fallback_used,
            raced=self.committer.raced,
            seconds=round(time.monotonic() - started, 3),
            sharded=self.claims is not None,
            shard=c.shard,
            claimed=self.claims.claimed if self.claims is not None else 0,
            breaker=breaker,
        ).as_xcom()


def run_step(ledger: Ledger, config: StepConfig) -> dict[str, Any]:
    """Run the step to completion in a fresh event loop (what the operator calls)."""
    runner = AIStepRunner(ledger, config)
    try:
        return asyncio.run(runner.run())
    finally:
        runner.close()
