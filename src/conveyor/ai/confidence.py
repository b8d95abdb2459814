"""Confidence for text LLMs, which report none of their own.

Two methods, chosen per step with ``confidence_method``:

``logprobs`` (default; costs no extra call)
    The request asks for the answer's token log-probabilities (``logprobs=true``, no
    alternatives). The
    confidence is the probability the model gave to the label it wrote: ``exp`` of the sum of
    the log-probabilities of the tokens that spell the label field's value in the JSON answer
    (``"category": "late_delivery"`` -> the tokens of ``late_delivery``). That is the joint
    probability of the label given the prompt and what precedes it. For a step without a label
    field (field extraction) it is the geometric mean token probability of the whole answer.
    Cost: no extra call and no extra billed tokens; the response carries one log-probability
    per token (several times the bytes of the bare answer, which the client must parse;
    ``bench/ai_step.py`` prints what that costs in client CPU per item). Needs an endpoint that
    returns ``logprobs`` (OpenAI chat completions and most OpenAI-compatible servers, e.g. vLLM);
    others yield no confidence and the item goes to review when a threshold is set.

``agreement`` (works with any endpoint; costs k calls)
    The item is sent ``samples`` times (k, default 3) at a non-zero temperature; the confidence
    is the share of samples that agree with the most frequent label (or the whole answer when
    there is no label field), and the answer kept is the first sample with that label. Cost: k
    times the calls, the tokens and the latency of one call. With k = 3 the confidence takes
    the values 1/3, 2/3 and 1, so a threshold of 0.7 means "unanimous".

Both work per answer when several items share a request (``items_per_call``, see
:mod:`conveyor.ai.batching`): the label is read within each answer's part of the text, and the
samples are compared item by item.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

METHODS = ("logprobs", "agreement", "none")


def _token_spans(logprobs: Sequence[Mapping[str, Any]]) -> tuple[str, list[tuple[int, int, float]]]:
    text_parts: list[str] = []
    spans: list[tuple[int, int, float]] = []
    position = 0
    for entry in logprobs:
        token = str(entry.get("token", ""))
        text_parts.append(token)
        spans.append((position, position + len(token), float(entry.get("logprob", 0.0))))
        position += len(token)
    return "".join(text_parts), spans


def label_probability(content: str, logprobs: Sequence[Mapping[str, Any]], label_field: str) -> float | None:
    """Probability of the label's tokens in a JSON answer; None when the tokens do not line up."""
    text, spans = _token_spans(logprobs)
    if not spans:
        return None
    offset = text.find(content) if text != content else 0
    if offset < 0:
        return None
    match = re.search(rf'"{re.escape(label_field)}"\s*:\s*"([^"]*)"', text)
    if match is None:
        return None
    start, end = match.span(1)
    total = sum(lp for a, b, lp in spans if a < end and b > start)
    return math.exp(total)


def mean_token_probability(logprobs: Sequence[Mapping[str, Any]]) -> float | None:
    """Geometric mean probability of every token of the answer."""
    values = [float(e.get("logprob", 0.0)) for e in logprobs]
    if not values:
        return None
    return math.exp(sum(values) / len(values))


def from_logprobs(content: str, logprobs: Sequence[Mapping[str, Any]] | None, label_field: str | None) -> float | None:
    """The ``logprobs`` method on one answer."""
    if not logprobs:
        return None
    if label_field:
        return label_probability(content, logprobs, label_field)
    return mean_token_probability(logprobs)


def from_logprobs_within(
    content: str,
    logprobs: Sequence[Mapping[str, Any]] | None,
    label_field: str | None,
    parts: Mapping[int, tuple[int, int]],
) -> dict[int, float | None]:
    """The ``logprobs`` method on each answer of a batch: part key -> confidence.

    :param parts: key -> (start, end) of each answer in the text. The tokens are lined up once
        for all parts (a batch's answer has thousands of tokens).
    """
    if not logprobs:
        return {key: None for key in parts}
    text, spans = _token_spans(logprobs)
    offset = 0 if text == content else text.find(content)  # where the answer starts in the tokens
    if offset < 0:
        return {key: None for key in parts}
    starts = [a for a, _, _ in spans]
    pattern = re.compile(rf'"{re.escape(label_field)}"\s*:\s*"([^"]*)"') if label_field else None
    out: dict[int, float | None] = {}
    for key, (low, high) in parts.items():
        low, high = low + offset, high + offset
        if pattern is not None:
            match = pattern.search(text, low, high)
            if match is None:
                out[key] = None
                continue
            low, high = match.span(1)
        # the tokens that overlap [low, high): from the last one starting at or before low
        first = max(bisect.bisect_right(starts, low) - 1, 0)
        values: list[float] = []
        for a, b, lp in spans[first:]:
            if a >= high:
                break
            if b > low:
                values.append(lp)
        if pattern is not None:
            out[key] = math.exp(sum(values)) if values else None
        else:
            out[key] = math.exp(sum(values) / len(values)) if values else None
    return out


def agreement(outputs: Sequence[Mapping[str, Any]], label_field: str | None) -> tuple[int, float]:
    """(index of the answer to keep, share of samples agreeing with it) for the ``agreement`` method."""
    if not outputs:
        raise ValueError("agreement needs at least one sample")

    def key(output: Mapping[str, Any]) -> str:
        if label_field:
            return str(output.get(label_field))
        return json.dumps(output, sort_keys=True, default=str)

    keys = [key(o) for o in outputs]
    winner, count = Counter(keys).most_common(1)[0]
    return keys.index(winner), count / len(outputs)


def distinct_figures(value: float, bound: float) -> tuple[str, str]:
    """A confidence and its threshold with as many decimals as it takes to tell them apart.

    ``0.6978`` below ``0.7`` reads ``0.698`` and ``0.70``, never ``0.70`` below ``0.70``; the bound
    keeps two decimals when that is its exact value.
    """
    for decimals in (2, 3, 4, 6):
        shown, limit = f"{value:.{decimals}f}", f"{bound:.{decimals}f}"
        if shown != limit:
            return shown, f"{bound:.2f}" if float(f"{bound:.2f}") == bound else limit
    return repr(float(value)), repr(float(bound))
