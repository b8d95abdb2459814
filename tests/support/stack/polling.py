"""Waiting on a condition with a deadline: the stack never sleeps for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class StackError(RuntimeError):
    """The deployment did not do what a test waited for; the message carries the relevant log tails."""


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` until it returns something other than None (or False), then return that.

    :param probe: returns None/False while the condition does not hold; may raise :class:`StackError`
        to give up at once (a component died, a run failed).
    :param timeout: seconds before giving up.
    :param what: the condition, for the error message.
    :param interval: seconds between probes.
    :param on_timeout: returns extra text for the error (log tails, last state seen).
    :raises StackError: the condition did not hold within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            detail = on_timeout() if on_timeout else ""
            raise StackError(f"timed out after {timeout:.0f} s waiting for {what}" + (f"\n{detail}" if detail else ""))
        time.sleep(interval)
