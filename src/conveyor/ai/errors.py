"""Errors of the AI step. Each message says what a person needs to act on."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

# The AI step's base is declared with the others in conveyor.errors; importable from here too.
from conveyor.errors import AIStepError as AIStepError


class ModelCallError(AIStepError):
    """One item's model call failed.

    :param message: what went wrong, readable by a reviewer.
    :param transient: True when a later attempt may succeed (429, 5xx, timeout, connection).
    :param code: a short machine-readable reason (``http_500``, ``timeout``, ``invalid_output``...).
    :param calls: how many requests were sent for the item before giving up.
    """

    def __init__(self, message: str, *, transient: bool, code: str, calls: int = 0) -> None:
        super().__init__(message)
        self.transient = transient
        self.code = code
        self.calls = calls


class BreakerOpen(AIStepError):
    """The circuit breaker of a model endpoint is open: nobody calls it until it half-opens.

    :param endpoint: the endpoint key.
    :param failures: consecutive failures recorded.
    :param opened_at: when it opened.
    :param retry_at: when it half-opens (one probe call is then let through).
    :param last_error: the failure that opened it.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        failures: int,
        opened_at: datetime | None,
        retry_at: datetime | None,
        last_error: str | None,
    ) -> None:
        self.endpoint = endpoint
        self.failures = failures
        self.opened_at = opened_at
        self.retry_at = retry_at
        self.last_error = last_error
        when = f" since {opened_at:%Y-%m-%d %H:%M:%S %Z}" if opened_at else ""
        retry = f"; it half-opens at {retry_at:%H:%M:%S %Z}" if retry_at else ""
        last = f"; last error: {last_error}" if last_error else ""
        super().__init__(
            f"circuit breaker open for model endpoint {endpoint!r}{when} after {failures} consecutive "
            f"failures{retry}{last}"
        )


class AIStepFailed(AIStepError):
    """The step did not reach its bar; the items it could handle are saved.

    :param message: the summary a person reads.
    :param summary: the step's summary (counts per outcome and reason).
    :param retryable: False when a retry cannot help (the failed items are already in review).
    """

    def __init__(self, message: str, *, summary: Mapping[str, Any], retryable: bool) -> None:
        super().__init__(message)
        self.summary = dict(summary)
        self.retryable = retryable
