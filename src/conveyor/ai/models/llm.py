"""An LLM behind an Airflow ``pydanticai`` connection, asked for structured output.

The model comes from common-ai's :class:`PydanticAIHook` (key in the password, base URL in the
host, ``{"model": "openai-chat:<model>"}`` in the extra for any OpenAI-compatible chat
completions endpoint; any pydantic-ai model string works). Each request goes through
pydantic-ai's direct model-request API with the task's pydantic schema as the native structured
output format, and the answer is validated against that schema. An answer that does not
validate gets ``repair_attempts`` more requests, which carry the validation errors back to the
model (pydantic-ai's retry feedback part). After that the item goes to review.

By default one request carries one item. With ``items_per_call`` > 1, one request carries that
many items (:mod:`conveyor.ai.batching`). That divides the per-request client cost and the
system-prompt tokens by n. An item whose answer in the batch is missing or invalid is asked
again on its own.

Why the direct request API and not an ``Agent``: on this project's bench machine an agent run
cost ~24 ms of CPU per item against ~9-13 ms for a direct request over the same model and
schema (the agent graph, capabilities and run bookkeeping are per run), and the AI step runs
thousands of one-shot requests per task. Tools, multi-turn runs and usage limits, which are
what the agent adds, are not used by a one-shot structured answer.

Every request goes through the endpoint's shared circuit breaker and the retry policy
(:mod:`conveyor.ai.retries`); pydantic-ai's and the SDK's own retries are switched off
(``max_retries=0``) so that attempts are counted, spaced and bounded in one place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from conveyor.ai import batching
from conveyor.ai import confidence as conf
from conveyor.ai.breaker import CircuitBreaker
from conveyor.ai.errors import BreakerOpen, ModelCallError
from conveyor.ai.models.base import ModelInput, Prediction, StepModel
from conveyor.ai.models.responses import text_and_logprobs, validation_summary
from conveyor.ai.retries import RetryPolicy, describe, is_transient

if TYPE_CHECKING:
    from pydantic_ai.models.openai import OpenAIChatModelSettings

    from conveyor.ai.definitions import AITask
    from conveyor.ledger.store import Ledger

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class LLMModel(StepModel):
    """One task's model behind one ``pydanticai`` connection.

    :param task: the AI task (prompt, schema, label field).
    :param conn_id: the Airflow connection id (type ``pydanticai``).
    :param ledger: the ledger whose database holds the breaker state.
    :param max_concurrency: requests in flight at once.
    :param call_timeout: seconds one request may take.
    :param retry: the per-call retry policy.
    :param breaker_threshold: consecutive failures that open the endpoint's breaker.
    :param breaker_cooldown: seconds before a half-open probe.
    :param breaker_poll_interval: seconds a breaker reading is reused.
    :param confidence_method: ``logprobs``, ``agreement`` or ``none`` (see :mod:`conveyor.ai.confidence`).
    :param samples: k for ``agreement``.
    :param sample_temperature: temperature of the agreement samples.
    :param repair_attempts: extra requests for an answer that fails schema validation.
    :param items_per_call: items per request (1: one request per item; see :mod:`conveyor.ai.batching`).
    """

    remote = True

    def __init__(
        self,
        task: AITask,
        conn_id: str,
        *,
        ledger: Ledger,
        max_concurrency: int = 8,
        call_timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        breaker_threshold: int = 5,
        breaker_cooldown: float = 60.0,
        breaker_poll_interval: float = 1.0,
        confidence_method: str = "logprobs",
        samples: int = 3,
        sample_temperature: float = 0.8,
        repair_attempts: int = 1,
        items_per_call: int = 1,
    ) -> None:
        from airflow.providers.common.ai.hooks.pydantic_ai import PydanticAIHook
        from pydantic_ai.models import ModelRequestParameters
        from pydantic_ai.output import OutputObjectDefinition

        if confidence_method not in conf.METHODS:
            raise ValueError(f"confidence_method must be one of {', '.join(conf.METHODS)}")
        if items_per_call < 1:
            raise ValueError("items_per_call must be at least 1")
        self.task = task
        self.conn_id = conn_id
        # Fallbacks are the step's own (after the breaker), not the hook's.
        self.hook = PydanticAIHook(llm_conn_id=conn_id, fallback_conn_ids=[])
        self.model = self.hook.get_conn()
        client = getattr(self.model, "client", None)
        base_url = str(getattr(client, "base_url", "") or "").rstrip("/")
        self.endpoint = f"{self.model.system}:{self.model.model_name}@{base_url or conn_id}"
        self.key = f"llm:{self.endpoint}"
        self.semaphore = asyncio.Semaphore(max_concurrency)
        self.call_timeout = call_timeout
        self.retry = retry or RetryPolicy()
        self.breaker = CircuitBreaker(
            ledger,
            self.endpoint,
            threshold=breaker_threshold,
            cooldown=breaker_cooldown,
            poll_interval=breaker_poll_interval,
            probe_timeout=max(2 * call_timeout, breaker_cooldown),
        )
        self.confidence_method = confidence_method
        self.samples = max(1, samples) if confidence_method == "agreement" else 1
        self.sample_temperature = sample_temperature
        self.repair_attempts = repair_attempts
        self.items_per_call = items_per_call

        def request_parameters(schema: type[Any]) -> ModelRequestParameters:
            return ModelRequestParameters(
                output_mode="native",
                output_object=OutputObjectDefinition(
                    json_schema=schema.model_json_schema(),
                    name=schema.__name__,
                    description=(schema.__doc__ or "").strip() or None,
                    strict=True,
                ),
                allow_text_output=True,
            )

        self.params = request_parameters(task.output_schema)
        self.batch_params = (
            request_parameters(batching.batch_schema(task.output_schema)) if items_per_call > 1 else None
        )
        self.instructions = task.prompt_text()
        self.calls = 0

    def settings(self, sample: int) -> OpenAIChatModelSettings:
        settings: OpenAIChatModelSettings = {"max_retries": 0, "timeout": self.call_timeout}
        if self.confidence_method == "logprobs":
            # Only the chosen tokens' log-probabilities: alternatives would double the response.
            settings["openai_logprobs"] = True
        if self.confidence_method == "agreement":
            # Samples must be free to differ; otherwise the model's own default applies (some
            # reasoning models refuse any explicit temperature).
            settings["temperature"] = self.sample_temperature
        return settings

    # -- one request, with the breaker and the retry policy ----------------------------------

    async def _request(
        self, messages: list[Any], settings: OpenAIChatModelSettings, spent: list[int], params: Any = None
    ) -> Any:
        from pydantic_ai.direct import model_request

        async for attempt in self.retry.retrying():
            with attempt:
                await self.breaker.acquire()
                spent[0] += 1
                self.calls += 1
                try:
                    response = await model_request(
                        self.model,
                        messages,
                        model_settings=settings,
                        model_request_parameters=params or self.params,
                    )
                except asyncio.CancelledError:
                    self.breaker.abandon()
                    raise
                except Exception as exc:
                    if is_transient(exc):
                        await self.breaker.record_failure(describe(exc)[1])
                    else:
                        await self.breaker.record_success()  # it answered; the request was at fault
                    raise
                await self.breaker.record_success()
                return response
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    async def _ask(
        self,
        instructions: str,
        message: str,
        parse: Callable[[str], _T],
        sample: int,
        spent: list[int],
        params: Any = None,
    ) -> tuple[_T, Any]:
        """One request and its repairs: (the parsed answer, the response).

        :param parse: answer text -> what the caller needs; raises ``ValueError`` (a pydantic
            ``ValidationError`` is one) for an unusable answer, whose errors go back to the model.
        """
        from pydantic import ValidationError
        from pydantic_ai.messages import (
            ModelRequest,
            RetryFeedbackPart,
            RetryInfo,
            SystemPromptPart,
            TextPart,
            UserPromptPart,
        )

        messages: list[Any] = [ModelRequest(parts=[SystemPromptPart(instructions), UserPromptPart(message)])]
        settings = self.settings(sample)
        output = (params or self.params).output_object
        assert output is not None  # request_parameters() declares the output object of every request
        schema = output.name
        for repair in range(self.repair_attempts + 1):
            response = await self._request(messages, settings, spent, params)
            text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
            try:
                return parse(text), response
            except ValueError as exc:
                if repair >= self.repair_attempts:
                    shown = " ".join(text.split())[:120]
                    raise ModelCallError(
                        f"model output did not match the {schema} schema after {self.repair_attempts} "
                        f"repair attempt(s): {validation_summary(exc)}; answer was {shown!r}",
                        transient=False,
                        code="invalid_output",
                    ) from None
                errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else str(exc)
                feedback = RetryFeedbackPart(content=errors, retry=RetryInfo("validation_error", attempt=repair + 1))
                messages += [response, ModelRequest(parts=[feedback])]
        raise AssertionError("unreachable")  # pragma: no cover

    async def _answer(self, data: dict[str, Any], sample: int, spent: list[int]) -> tuple[dict[str, Any], Any]:
        """One schema-valid answer: (output, response)."""
        schema = self.task.output_schema
        return await self._ask(
            self.instructions,
            self.task.user_message(data),
            lambda text: schema.model_validate_json(text).model_dump(mode="json"),
            sample,
            spent,
        )

    def _failed(self, exc: Exception, spent: int) -> Prediction:
        """The prediction of an item whose request failed (breaker open, model error, transport)."""
        if isinstance(exc, BreakerOpen):
            return Prediction(model=self.key, calls=spent, error=exc)
        if isinstance(exc, ModelCallError):
            exc.calls = spent
            return Prediction(model=self.key, calls=spent, error=exc)
        code, message = describe(exc)
        transient = is_transient(exc)
        attempts = f" after {spent} attempt(s)" if transient else ""
        error = ModelCallError(f"model call failed{attempts}: {message}", transient=transient, code=code, calls=spent)
        return Prediction(model=self.key, calls=spent, error=error)

    def _logprob_confidence(self, response: Any) -> float | None:
        return conf.from_logprobs(*text_and_logprobs(response), self.task.label_field)

    def _prediction(
        self, answers: Sequence[tuple[dict[str, Any], float | None]], calls: int, **detail: Any
    ) -> Prediction:
        """One item's prediction from its answer(s): one per sample, each with its log-prob confidence."""
        info: dict[str, Any] = {"method": self.confidence_method, "calls": calls, **detail}
        confidence: float | None
        if self.confidence_method == "agreement":
            keep, share = conf.agreement([o for o, _ in answers], self.task.label_field)
            output, confidence = answers[keep][0], share
            info["samples"] = [o.get(self.task.label_field) if self.task.label_field else None for o, _ in answers]
        else:
            output, confidence = answers[0]
            if self.confidence_method == "logprobs" and confidence is None:
                info["note"] = "the endpoint returned no usable log-probabilities"
        return Prediction(
            output=output,
            confidence=None if confidence is None else round(confidence, 4),
            model=self.key,
            calls=calls,
            detail=info,
        )

    async def predict_one(self, item: ModelInput) -> Prediction:
        spent = [0]
        try:
            async with self.semaphore:
                answers = [await self._answer(item.data, s, spent) for s in range(self.samples)]
        except Exception as exc:
            return self._failed(exc, spent[0])
        scored = [
            (output, self._logprob_confidence(response) if self.confidence_method == "logprobs" else None)
            for output, response in answers
        ]
        return self._prediction(scored, spent[0])

    # -- several items per request -----------------------------------------------------------

    async def _answer_batch(
        self, inputs: Sequence[ModelInput], sample: int, spent: list[int]
    ) -> dict[int, tuple[dict[str, Any], float | None]]:
        """One request for all ``inputs``: item number (1-based) -> (answer, log-prob confidence).

        Items whose answer is missing, repeated or invalid are left out (the caller asks again).
        """
        read, response = await self._ask(
            self.instructions + batching.BATCH_NOTE,
            batching.batch_message(self.task.user_message, [i.data for i in inputs]),
            lambda text: batching.read_batch(text, self.task.output_schema, len(inputs)),
            sample,
            spent,
            self.batch_params,
        )
        if self.confidence_method != "logprobs":
            return {number: (output, None) for number, output in read.outputs.items()}
        text, logprobs = text_and_logprobs(response)
        spans = {number: read.spans[number] for number in read.outputs if number in read.spans}
        scores = conf.from_logprobs_within(text, logprobs, self.task.label_field, spans)
        # An answer whose place in the text is unclear cannot be scored: it is asked again alone.
        return {number: (read.outputs[number], score) for number, score in scores.items()}

    async def predict_batch(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        """Predictions for ``inputs`` from one request (k with ``agreement``), in order.

        Items the batch did not answer usably are asked again one by one; so is every item of a
        batch that failed for a reason of its own (a rejected request, an answer of the wrong
        shape). A breaker that is open, or an endpoint that stays unavailable, fails them all.
        """
        spent = [0]
        try:
            async with self.semaphore:
                samples = [await self._answer_batch(inputs, s, spent) for s in range(self.samples)]
        except Exception as exc:
            unavailable = isinstance(exc, BreakerOpen) or (
                exc.transient if isinstance(exc, ModelCallError) else is_transient(exc)
            )
            if unavailable:
                first = self._failed(exc, spent[0])
                return [first] + [Prediction(model=self.key, error=first.error) for _ in inputs[1:]]
            log.warning("A batch of %d item(s) failed (%s); asking each item on its own.", len(inputs), exc)
            singles = list(await asyncio.gather(*(self.predict_one(i) for i in inputs)))
            singles[0].calls += spent[0]
            return singles
        out: list[Prediction | None] = []
        retry: list[int] = []
        for n in range(len(inputs)):
            answers = [sample[n + 1] for sample in samples if n + 1 in sample]
            if len(answers) < len(samples):
                out.append(None)
                retry.append(n)
                continue
            out.append(self._prediction(answers, 0, batched=len(inputs), batch_calls=spent[0]))
        if retry:
            log.info(
                "%d of %d item(s) were not answered usably in their batch; asking them one by one.",
                len(retry),
                len(inputs),
            )
            for n, single in zip(
                retry, await asyncio.gather(*(self.predict_one(inputs[n]) for n in retry)), strict=True
            ):
                out[n] = single
        predictions = [p for p in out if p is not None]
        predictions[0].calls += spent[0]  # the batch's requests, counted once
        return predictions

    async def predict_many(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        if self.items_per_call == 1 or len(inputs) <= 1:
            return list(await asyncio.gather(*(self.predict_one(i) for i in inputs)))
        n = self.items_per_call
        groups = [inputs[k : k + n] for k in range(0, len(inputs), n)]
        answered = await asyncio.gather(*(self._predict_group(g) for g in groups))
        return [p for group in answered for p in group]

    async def _predict_group(self, group: Sequence[ModelInput]) -> list[Prediction]:
        return await self.predict_batch(group) if len(group) > 1 else [await self.predict_one(group[0])]

    def close(self) -> None:
        self.breaker.close()
