"""What a chunk's answers come to: each item passed, held for a person (and why), or deferred.

Pure: no model call, no ledger write. :func:`judge_chunk` turns the model's predictions for one
chunk into a :class:`ChunkOutcome` the engine (:mod:`conveyor.ai.runner`) commits in one go:

* an input the model could not be given, a permanent model error, no answer, an answer that does
  not match the task's schema or that jsonb cannot hold: held for review with the reason, and
  counted as a failure (``max_failure_rate``);
* a transient model error (its retries exhausted): deferred, left in ``from_status`` for the retry
  or, if the step tolerates it, sent to review at the end;
* an open breaker: not processed (the step stops, see the runner);
* an answer under ``min_confidence`` or failing a rule check: held with every reason;
* an answer that passed everything: passed, unless the spot-check draw sends it to a person anyway.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conveyor.ai.checks import run_checks
from conveyor.ai.confidence import distinct_figures
from conveyor.ai.definitions import AITask, ItemView
from conveyor.ai.errors import BreakerOpen, ModelCallError
from conveyor.ai.models.base import ModelInput, Prediction
from conveyor.ai.spot_checks import drawn, spot_reason
from conveyor.ai.step_config import StepConfig
from conveyor.ledger.ai_labels import routing_detail
from conveyor.ledger.store import ItemUpdate
from conveyor.ledger.values import problem_in


@dataclass
class ChunkOutcome:
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
    #: model calls the chunk's answers cost, and how many came from the result cache
    calls: int = 0
    cache_hits: int = 0

    def fail(self, item_id: str, reason: str, code: str, review_target: str | None) -> None:
        """Hold an item that has no usable answer for a person, counted as a failure."""
        self.review[item_id] = ItemUpdate(reason=reason, last_error=reason, review_target=review_target, add_attempts=1)
        self.failures[code] += 1


def judge_chunk(
    task: AITask,
    config: StepConfig,
    views: Sequence[ItemView],
    inputs: Mapping[str, ModelInput],
    input_errors: Mapping[str, str],
    predictions: Mapping[str, Prediction],
) -> ChunkOutcome:
    """Route each of the chunk's items by its answer (see the module's docstring)."""
    outcome = ChunkOutcome()
    target = config.to_status
    for view in views:
        item_id = view.item_id
        if item_id in input_errors:
            outcome.fail(item_id, f"input cannot be sent to the model: {input_errors[item_id]}", "input_error", target)
            continue
        p = predictions[item_id]
        outcome.calls += p.calls
        outcome.cache_hits += int(p.cached)
        if isinstance(p.error, BreakerOpen):
            outcome.unprocessed.append(item_id)
            outcome.breaker = p.error
            continue
        if isinstance(p.error, ModelCallError):
            update = ItemUpdate(
                reason=f"model error: {p.error}", last_error=str(p.error), review_target=target, add_attempts=1
            )
            if p.error.transient:
                outcome.deferred[item_id] = update
                outcome.failures[f"unavailable:{p.error.code}"] += 1
            else:
                outcome.review[item_id] = update
                outcome.failures[p.error.code] += 1
            continue
        if p.error is not None or p.output is None:
            outcome.fail(item_id, f"model error: {p.error or 'no answer'}", "no_answer", target)
            continue
        schema = task.output_schema
        try:
            output = schema.model_validate(p.output).model_dump(mode="json")
        except Exception as exc:
            reason = f"model output does not match the {schema.__name__} schema: {str(exc).splitlines()[0]}"
            outcome.fail(item_id, reason, "invalid_output", target)
            continue
        unstorable = problem_in(output) or problem_in(p.confidence, "confidence")
        if unstorable:  # a NUL byte or NaN in the answer: a person looks, the ledger stays writable
            outcome.fail(item_id, f"model output cannot be stored: {unstorable}", "invalid_output", target)
            continue
        _route_answer(task, config, view, output, p, inputs[item_id].data, outcome)
    return outcome


def _route_answer(
    task: AITask,
    config: StepConfig,
    view: ItemView,
    output: dict[str, Any],
    p: Prediction,
    model_input: Any,
    outcome: ChunkOutcome,
) -> None:
    """A well-formed answer: held for its checks and its confidence, spot-checked, or passed."""
    c = config
    item_id = view.item_id
    failed = run_checks(task.checks, output, model_input)
    reasons = [reason for _, reason in failed]
    codes = [f"check:{code}" for code, _ in failed]
    label = f" ({task.label_field} {output.get(task.label_field)!r})" if task.label_field else ""
    if p.confidence is None and c.settings.min_confidence > 0:
        reasons.insert(0, f"the model reported no confidence{label}; threshold is {c.settings.min_confidence:.2f}")
        codes.insert(0, "no_confidence")
    elif p.confidence is not None and p.confidence < c.settings.min_confidence:
        shown, bound = distinct_figures(p.confidence, c.settings.min_confidence)
        reasons.insert(0, f"confidence {shown} is below the threshold {bound}{label}")
        codes.insert(0, "low_confidence")
    result = task.merge(view.ai_result, output)
    step = c.step or task.name  # always set by StepConfig.__post_init__
    if reasons:
        outcome.review[item_id] = ItemUpdate(
            reason="; ".join(reasons),
            ai_result=result,
            confidence=p.confidence,
            review_target=c.to_status,
            add_attempts=1,
            detail=routing_detail(step=step, confidence=p.confidence, failed_checks=codes, spot_check=False, share=1.0),
        )
        outcome.reasons.update(codes)
        if codes == ["low_confidence"] or codes == ["no_confidence"]:
            outcome.low_only_confidence[item_id] = p.confidence
        return
    outcome.passing_confidence[item_id] = p.confidence
    if c.settings.spot_check and drawn(c.seed, item_id, c.settings.spot_check):
        outcome.spot.add(item_id)
        outcome.review[item_id] = ItemUpdate(
            reason=spot_reason(p.confidence, c.settings.spot_check),
            ai_result=result,
            confidence=p.confidence,
            review_target=c.to_status,
            add_attempts=1,
            detail=routing_detail(
                step=step,
                confidence=p.confidence,
                failed_checks=(),
                spot_check=True,
                share=c.settings.spot_check,
                seed=c.seed,
            ),
        )
        return
    via = f" via fallback {p.model}" if p.detail.get("fallback_from") else ""
    conf = f", confidence {p.confidence:.2f}" if p.confidence is not None else ""
    outcome.passed[item_id] = ItemUpdate(
        reason=f"{task.name} by {p.model}{via}{conf}", ai_result=result, confidence=p.confidence, add_attempts=1
    )
