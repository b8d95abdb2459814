"""Which model errors are worth another attempt, and how long to wait before it (tenacity).

Transient: rate limits (429), server errors (5xx), timeouts and connection failures: retried with
exponential backoff and full jitter, or, when the server says ``Retry-After`` (pydantic-ai reads
``retry-after-ms`` and ``Retry-After`` into ``retry_after``), after at least that long.
Permanent: a rejected request (400, 401, 403, 404, 422), exhausted quota, and output that does
not match the schema after its repair attempts: never retried, the item goes to review.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conveyor.ai.errors import BreakerOpen, ModelCallError

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


def is_transient(exc: BaseException) -> bool:
    """True for errors a later attempt may not see again."""
    if isinstance(exc, BreakerOpen):
        return False
    if isinstance(exc, ModelCallError):
        return exc.transient
    from pydantic_ai.exceptions import (
        ModelAPIError,
        ModelConnectionError,
        ModelHTTPError,
        ModelQuotaExceededError,
        ModelRateLimitError,
        ModelServerError,
        ModelUnavailableError,
    )

    if isinstance(exc, ModelQuotaExceededError):
        return False
    if isinstance(exc, ModelRateLimitError | ModelServerError | ModelUnavailableError | ModelConnectionError):
        return True
    if isinstance(exc, ModelHTTPError):
        return exc.status_code in _TRANSIENT_STATUS or exc.status_code >= 500
    if isinstance(exc, ModelAPIError):
        return False
    return isinstance(exc, TimeoutError | ConnectionError)


def describe(exc: BaseException) -> tuple[str, str]:
    """(code, one-line message) of a model error, for the item's reason and the summary counts."""
    from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, ModelTimeoutError

    if isinstance(exc, ModelHTTPError):
        body = exc.body if isinstance(exc.body, dict) else {}
        message = body.get("message") or str(exc.body or "")[:160]
        return f"http_{exc.status_code}", f"HTTP {exc.status_code} from {exc.model_name}: {message}".strip()
    if isinstance(exc, ModelTimeoutError | TimeoutError):
        return "timeout", f"no answer within the call timeout ({type(exc).__name__})"
    if isinstance(exc, ModelAPIError):
        return "connection", f"{type(exc).__name__}: {exc.message}"[:240]
    return type(exc).__name__.lower(), f"{type(exc).__name__}: {exc}"[:240]


@dataclass(frozen=True)
class RetryPolicy:
    """Per-call retry settings.

    :param max_attempts: attempts per call, the first included.
    :param backoff_base: seconds of the first backoff; doubles each attempt (full jitter).
    :param backoff_max: the longest backoff without ``Retry-After``.
    :param max_retry_after: the longest ``Retry-After`` honoured; a longer one ends the retries.
    """

    max_attempts: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 120.0

    def retry_after(self, exc: BaseException | None) -> float | None:
        value = getattr(exc, "retry_after", None)
        return float(value) if value is not None else None

    def should_retry(self, exc: BaseException) -> bool:
        if not is_transient(exc):
            return False
        asked = self.retry_after(exc)
        return asked is None or asked <= self.max_retry_after

    def wait(self) -> Callable[[Any], float]:
        """A tenacity wait: ``Retry-After`` plus up to 10% jitter, else exponential full jitter."""
        from tenacity import wait_random_exponential

        exponential = wait_random_exponential(multiplier=self.backoff_base, max=self.backoff_max)

        def _wait(state: Any) -> float:
            exc = state.outcome.exception() if state.outcome else None
            asked = self.retry_after(exc)
            if asked is not None:
                return asked + random.uniform(0, min(1.0, 0.1 * asked))
            return exponential(state)

        return _wait

    def retrying(self) -> Any:
        """A configured ``tenacity.AsyncRetrying``."""
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

        return AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self.wait(),
            retry=retry_if_exception(self.should_retry),
            reraise=True,
        )
