"""Spot checks: a share of the answers that passed every check, sent to a person anyway.

A threshold is a guess until decisions measure it; doubtful answers alone cannot say how often the
answers that pass are wrong. So an AI step with ``spot_check=<share>`` sends that share of its
passing answers to review, chosen at random, and the decisions on them estimate the error rate of
what passes unreviewed (:mod:`conveyor.monitoring.accuracy`).

The draw is reproducible: the seed is derived from the workflow, the run and the step, and each
item is drawn from the seed and its id, so a retry or a clear of the step picks the same items
(an item already decided is not sent again). The seed is recorded on each spot check's audit row
and on the step's tallies in the ledger.

Cheap to import (the standard library only): the operator's defaults live here, for DAG files.
"""

from __future__ import annotations

import hashlib

#: No spot checks unless the step asks for them.
DEFAULT_SPOT_CHECK = 0.0
#: No declared target: nothing is alerted on and no threshold is recommended.
DEFAULT_MAX_ERROR_RATE: float | None = None


def check_settings(spot_check: float, max_error_rate: float | None) -> None:
    """Refuse settings that cannot be meant, naming the parameter and what it takes.

    :raises ValueError: a share outside [0, 1), or a target outside (0, 1).
    """
    if not isinstance(spot_check, int | float) or not 0 <= spot_check < 1:
        raise ValueError(
            f"spot_check must be a share between 0 (none) and below 1, e.g. 0.02; got {spot_check!r}"
        )
    if max_error_rate is not None and (not isinstance(max_error_rate, int | float) or not 0 < max_error_rate < 1):
        raise ValueError(
            f"max_error_rate must be a share between 0 and 1 (e.g. 0.02), or None; got {max_error_rate!r}"
        )


def spot_seed(workflow: str, run_id: str, step: str) -> str:
    """The seed of one step's draw in one run: the same for every retry and clear of the step."""
    return hashlib.sha256(f"{workflow}\x1f{run_id}\x1f{step}".encode()).hexdigest()[:16]


def drawn(seed: str, item_id: str, share: float) -> bool:
    """Whether ``item_id`` is one of the spot checks of the draw ``seed`` at ``share``."""
    if share <= 0:
        return False
    digest = hashlib.sha256(f"{seed}\x1f{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def spot_reason(confidence: float | None, share: float) -> str:
    """What the review page shows of a spot check."""
    shown = "no confidence" if confidence is None else f"confidence {confidence:.2f}"
    return f"passed with {shown}; checked at random (spot check of {share * 100:g}% of passing answers)"
