"""Who answers a chunk: the step's primary model, its fallback, and the result cache before both.

:class:`StepModels` is built once per run from the :class:`~conveyor.ai.step_config.StepConfig`.
For remote models each distinct input is answered once: from the cache if an earlier run (or an
earlier attempt of this one) paid for it, else by one call, whose answer the chunk's duplicates
share. New answers wait in memory until :meth:`StepModels.flush_cache` writes them, which the
engine does before any item moves, so a kill after that point costs no call again.

When the primary's breaker is open, or its retries for an item are exhausted, and a fallback is
declared, the fallback answers those items; each such answer says so in its detail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from conveyor.ai.cache import CachedAnswer, ResultCache
from conveyor.ai.errors import BreakerOpen, ModelCallError
from conveyor.ai.models.base import ModelInput, Prediction, StepModel
from conveyor.ai.step_config import StepConfig
from conveyor.ledger.faults import patiently
from conveyor.ledger.store import Ledger
from conveyor.ledger.values import problem_in

log = logging.getLogger(__name__)


class StepModels:
    """The models of one run of the step, and their cache.

    :param ledger: the ledger holding the result cache (and the LLMs' shared breakers).
    :param config: the step's configuration: which models, and the LLM settings.
    """

    def __init__(self, ledger: Ledger, config: StepConfig) -> None:
        self.ledger = ledger
        self.config = config
        self.task = config.task
        self.cache = ResultCache(ledger)
        self.primary = self._build(config.model)
        self.fallback = self._build(config.fallback_model) if config.fallback_model else None
        #: items the fallback answered in this run
        self.fallback_used = 0
        self._pending_cache: dict[str, dict[str, CachedAnswer]] = {}
        self._cache_owner: dict[str, str] = {}

    @property
    def hashed(self) -> bool:
        """Whether inputs are hashed: only remote answers are cached (a local model is cheaper to
        run than to look up)."""
        return self.primary.remote or (self.fallback is not None and self.fallback.remote)

    def _build(self, spec: object) -> StepModel:
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
            max_concurrency=c.settings.max_concurrency,
            call_timeout=c.settings.call_timeout,
            retry=c.settings.retry,
            breaker_threshold=c.settings.breaker_threshold,
            breaker_cooldown=c.settings.breaker_cooldown,
            breaker_poll_interval=c.breaker_poll_interval,
            confidence_method=c.settings.confidence_method,
            samples=c.settings.samples,
            repair_attempts=c.settings.repair_attempts,
            items_per_call=c.items_per_call,
        )

    def close(self) -> None:
        for model in (self.primary, self.fallback):
            if model is not None:
                model.close()

    async def predict(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        """One prediction per input, in order: the primary's, or the fallback's where it could not."""
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
                self.fallback_used += 1
        return predictions

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
            # An answer jsonb cannot hold is not cached: it goes to review (see judging), unbilled again.
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
                        output=hit.output, confidence=hit.confidence, model=model.key, cached=True, detail=hit.detail
                    )
                )
                continue
            p = fresh[i.input_hash]
            if i.input_hash in sent:  # a duplicate input in this chunk: same answer, no second call
                p = Prediction(
                    output=p.output, confidence=p.confidence, model=p.model, calls=0, cached=True,
                    error=p.error, detail=p.detail,
                )  # fmt: skip
            sent.add(i.input_hash)
            out.append(p)
        return out

    def flush_cache(self) -> None:
        """Write the answers paid for since the last flush (an upsert: safe to repeat)."""
        for model_key, answers in self._pending_cache.items():
            if answers:
                owners = {h: self._cache_owner.get(h, "") for h in answers}
                self.cache.put_many(model_key, self.task.version, answers, owners)
        self._pending_cache.clear()
        self._cache_owner.clear()
