"""Recovery strategies: every task of a bundled DAG says how it recovers from failure.

A task declares one in its ``doc_md`` (shown in the Airflow UI's task docs) with a line
``Recovery: <strategy> — <why>``; :func:`recovery` writes that line. ``conveyor lint`` fails any
task without one.
"""

from __future__ import annotations

import re
from enum import StrEnum


class Recovery(StrEnum):
    """The five ways a step of a business workflow recovers."""

    #: transient failures: Airflow retries the task (with backoff)
    RETRY = "retry"
    #: a failing dependency: stop calling it for a while, shared by every worker
    CIRCUIT_BREAKER = "circuit breaker"
    #: a second way to the same result (a fallback model, a scripted default)
    ALTERNATIVE_PATH = "alternative path"
    #: finish with partial results while failures stay under a tolerated share
    GRACEFUL_DEGRADATION = "graceful degradation"
    #: a person decides (review queue, sign-off, fix the feed and clear the task)
    MANUAL_INTERVENTION = "manual intervention"


_STRATEGIES = "|".join(re.escape(s.value) for s in Recovery)
RECOVERY_LINE = re.compile(
    rf"^[\s>*_-]*Recovery[*_]*\s*:[*_\s]*(?P<strategy>{_STRATEGIES})\b", re.IGNORECASE | re.MULTILINE
)


def recovery(*strategies: Recovery, why: str, doc: str | None = None) -> str:
    """The ``doc_md`` of a task: its description (optional) and its recovery line.

    :param strategies: one or more strategies, most important first.
    :param why: one sentence a person on call acts on.
    :param doc: what the task does, shown above the recovery line.
    """
    if not strategies:
        raise ValueError("declare at least one recovery strategy")
    line = f"Recovery: {' + '.join(Recovery(s).value for s in strategies)} — {why}"
    return f"{doc.strip()}\n\n{line}" if doc else line


def declared(doc_md: str | None) -> list[Recovery]:
    """The strategies a task's docs declare (empty when none)."""
    if not doc_md:
        return []
    found: list[Recovery] = []
    for match in RECOVERY_LINE.finditer(doc_md):
        found.append(Recovery(match.group("strategy").lower()))
        rest = doc_md[match.end() :].split("\n", 1)[0]
        found.extend(Recovery(m.lower()) for m in re.findall(rf"\+\s*({_STRATEGIES})", rest, re.IGNORECASE))
    return found
