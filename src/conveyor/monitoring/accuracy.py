"""The guardrail measured: how often what passes an AI step unreviewed is wrong, and at which threshold.

Pure functions of what the ledger recorded (no I/O; :mod:`.accuracy_reads` reads the ledger):

* **passed error rate**: of the answers that passed every check, the share a person found wrong,
  estimated from the spot checks (a random share of the passing answers sent to review anyway),
  with an exact one-sided 95% Clopper–Pearson upper bound and its sample size;
* **exception rate**: the share of the step's answers its checks routed to review (spot checks
  are counted apart);
* **reviewed error rate**: of the doubtful answers people decided, the share that were wrong;
* **the curve**: for each candidate ``min_confidence``, the share the step would send to review
  (exact, from the step's confidence histograms) against the estimated error of what would pass
  (from the decided answers with at least that confidence, each weighted by the inverse of its
  sampling share, with a Clopper–Pearson bound on the weights' effective sample size);
* **recommended_min_confidence**: the candidate with the smallest review share whose upper bound
  stays at or under the step's declared ``max_error_rate``. It recommends; a person changes it.

A rejected answer (the input was bad) says nothing of the model and is left out of the error
rates; a corrected one is wrong, an approved one right.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from conveyor.ledger.ai_labels import BUCKETS, AnswerLabel, StepTally

#: One-sided confidence of every bound.
CONFIDENCE = 0.95
#: The failed-check codes a different threshold could change (any other check routes regardless).
CONFIDENCE_CODES = frozenset({"low_confidence", "no_confidence"})
#: Thresholds the curve is drawn at (the step's own is added).
CANDIDATES = tuple(round(0.05 * n, 2) for n in range(21))


# -- exact binomial bounds -----------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-12:
            break
    return h


def beta_cdf(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (the Beta(a, b) distribution function)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


@functools.lru_cache(maxsize=4096)  # a curve asks for the same (k, n) at many thresholds
def _beta_quantile(q: float, a: float, b: float) -> float:
    low, high = 0.0, 1.0
    for _ in range(34):  # bisection to ~6e-11, far below any share shown: the function is monotone
        mid = (low + high) / 2
        if beta_cdf(mid, a, b) < q:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def upper_bound(wrong: float, n: float, confidence: float = CONFIDENCE) -> float:
    """Clopper–Pearson one-sided upper bound of a rate seen ``wrong`` times in ``n`` (real counts
    allowed, for an effective sample size): the p at which seeing ``wrong`` or fewer has
    probability ``1 - confidence``. 1 with no sample."""
    if n <= 0:
        return 1.0
    if wrong >= n:
        return 1.0
    return _beta_quantile(confidence, wrong + 1.0, n - wrong)


def lower_bound(wrong: float, n: float, confidence: float = CONFIDENCE) -> float:
    """Clopper–Pearson one-sided lower bound (0 when nothing was wrong)."""
    if n <= 0 or wrong <= 0:
        return 0.0
    return _beta_quantile(1.0 - confidence, wrong, n - wrong + 1.0)


def rise_p_value(before: tuple[int, int], now: tuple[int, int]) -> float:
    """One-sided Fisher exact test that the rate ``now`` (wrong, n) is higher than ``before``: the
    probability of at least this many wrong now if both periods had the same rate."""
    k1, n1 = now
    k0, n0 = before
    total, wrong = n0 + n1, k0 + k1
    if n1 == 0 or n0 == 0 or wrong == 0:
        return 1.0

    def log_comb(n: int, k: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)

    denominator = log_comb(total, wrong)
    p = 0.0
    for k in range(k1, min(n1, wrong) + 1):
        if wrong - k <= n0:
            p += math.exp(log_comb(n1, k) + log_comb(n0, wrong - k) - denominator)
    return min(p, 1.0)


# -- the estimate --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CurvePoint:
    """One candidate threshold.

    :param min_confidence: the candidate.
    :param review_share: the share of the step's answers its checks would send to review.
    :param passed_error: the estimated error rate of the answers that would pass (None: no sample).
    :param passed_error_upper: its 95% upper bound.
    :param sample: the effective sample size behind it.
    """

    min_confidence: float
    review_share: float
    passed_error: float | None
    passed_error_upper: float
    sample: float


@dataclass(frozen=True)
class StepAccuracy:
    """One AI step's measured guardrail over one period (see the module docstring)."""

    workflow: str
    step: str
    since: datetime
    until: datetime
    min_confidence: float | None
    spot_check: float | None
    max_error_rate: float | None
    answers: int
    passed: int
    spot_checks_sent: int
    exceptions: int
    exception_rate: float | None
    #: decided spot checks: the sample size of the passed error rate
    spot_checked: int
    spot_wrong: int
    passed_error_rate: float | None
    passed_error_upper: float
    passed_error_lower: float
    reviewed: int
    reviewed_wrong: int
    reviewed_error_rate: float | None
    bad_input: int
    curve: list[CurvePoint] = field(default_factory=list)
    recommended_min_confidence: float | None = None
    recommended_review_share: float | None = None

    @property
    def over_target(self) -> bool:
        """The upper bound exceeds the declared target (False with no target)."""
        return self.max_error_rate is not None and self.passed_error_upper > self.max_error_rate

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["since"], data["until"] = self.since.isoformat(), self.until.isoformat()
        return data


def _from_sums(total: float, wrong: float, squares: float) -> tuple[float | None, float, float]:
    """(estimate, 95% upper bound, effective sample size) from the sums of the weights, of the
    wrong ones' weights and of the squared weights: the ratio estimate, and Clopper–Pearson on
    Kish's effective sample size (equal weights: k wrong of n)."""
    if total <= 0:
        return None, 1.0, 0.0
    rate = wrong / total
    n_eff = total * total / squares
    return rate, upper_bound(rate * n_eff, n_eff), n_eff


def _weighted(points: Sequence[tuple[float, bool]]) -> tuple[float | None, float, float]:
    """:func:`_from_sums` of weighted (weight, wrong) points."""
    return _from_sums(sum(w for w, _ in points), sum(w for w, bad in points if bad), sum(w * w for w, _ in points))


class _Above:
    """Sums over the weighted labels at or above any confidence, after one sort (a curve asks at
    every candidate threshold)."""

    def __init__(self, points: Sequence[tuple[float, float, bool]]) -> None:
        ordered = sorted(points)  # (confidence, weight, wrong)
        self.confidences = [c for c, _, _ in ordered]
        self.sums = [(0.0, 0.0, 0.0)] * (len(ordered) + 1)  # from position i to the end
        for i in range(len(ordered) - 1, -1, -1):
            _, w, bad = ordered[i]
            t, k, q = self.sums[i + 1]
            self.sums[i] = (t + w, k + (w if bad else 0.0), q + w * w)

    def at(self, threshold: float) -> tuple[float | None, float, float]:
        return _from_sums(*self.sums[bisect.bisect_left(self.confidences, threshold)])


def _latest(tallies: Sequence[StepTally]) -> StepTally | None:
    return max(tallies, key=lambda t: (t.at is not None, t.at)) if tallies else None


def estimate(
    tallies: Sequence[StepTally],
    labels: Sequence[AnswerLabel],
    *,
    workflow: str,
    step: str,
    since: datetime,
    until: datetime,
    max_error_rate: float | None = None,
) -> StepAccuracy:
    """The measured guardrail of one step from its tallies and its decided answers of one period.

    :param tallies: the step's chunk tallies of the period.
    :param labels: the step's decided answers routed to review in the period.
    :param max_error_rate: the target (default: the one the step declared last).
    """
    latest = _latest(tallies)
    if max_error_rate is None and latest is not None:
        max_error_rate = latest.max_error_rate
    passed = sum(t.passed for t in tallies)
    sent = sum(t.spot_checked for t in tallies)
    exceptions = sum(t.exceptions for t in tallies)
    answers = passed + sent + exceptions
    passing_hist = [sum(t.passed_by_confidence[b] for t in tallies) for b in range(BUCKETS)]
    low_hist = [sum(t.low_only_by_confidence[b] for t in tallies) for b in range(BUCKETS)]

    judged = [lb for lb in labels if lb.outcome != "bad_input"]
    spots = [lb for lb in judged if lb.spot_check]
    doubtful = [lb for lb in judged if not lb.spot_check]
    spot_wrong = sum(lb.outcome == "wrong" for lb in spots)
    passed_rate, passed_upper, _ = _weighted([(1.0 / lb.share, lb.outcome == "wrong") for lb in spots])
    reviewed_wrong = sum(lb.outcome == "wrong" for lb in doubtful)

    # Answers routed for low confidence alone would pass at a lower threshold: the decided ones
    # stand for all of them (weight = routed / decided), spot checks for every passing answer.
    low_decided = [lb for lb in doubtful if set(lb.failed_checks) <= CONFIDENCE_CODES]
    low_total = sum(low_hist)
    low_weight = low_total / len(low_decided) if low_decided else 0.0
    weighted = [(1.0 / lb.share, lb) for lb in spots] + [(low_weight, lb) for lb in low_decided]
    above = _Above([(lb.confidence or 0.0, w, lb.outcome == "wrong") for w, lb in weighted if w > 0])
    current = latest.min_confidence if latest is not None else None
    candidates = sorted({*CANDIDATES, *([round(current, 2)] if current is not None else [])})
    curve = []
    for threshold in candidates:
        cut = round(threshold * 100)
        to_review = exceptions - low_total + sum(low_hist[:cut]) + sum(passing_hist[:cut])
        rate, upper, n_eff = above.at(threshold)
        curve.append(
            CurvePoint(
                min_confidence=threshold,
                review_share=to_review / answers if answers else 0.0,
                passed_error=rate,
                passed_error_upper=upper,
                sample=round(n_eff, 1),
            )
        )
    meeting = [p for p in curve if max_error_rate is not None and p.passed_error_upper <= max_error_rate]
    best = min(meeting, key=lambda p: (p.review_share, p.min_confidence)) if meeting else None
    return StepAccuracy(
        workflow=workflow,
        step=step,
        since=since,
        until=until,
        min_confidence=current,
        spot_check=latest.spot_check if latest is not None else None,
        max_error_rate=max_error_rate,
        answers=answers,
        passed=passed,
        spot_checks_sent=sent,
        exceptions=exceptions,
        exception_rate=exceptions / answers if answers else None,
        spot_checked=len(spots),
        spot_wrong=spot_wrong,
        passed_error_rate=passed_rate,
        passed_error_upper=passed_upper,
        passed_error_lower=lower_bound(spot_wrong, len(spots)) if spots else 0.0,
        reviewed=len(doubtful),
        reviewed_wrong=reviewed_wrong,
        reviewed_error_rate=reviewed_wrong / len(doubtful) if doubtful else None,
        bad_input=len(labels) - len(judged),
        curve=curve,
        recommended_min_confidence=best.min_confidence if best else None,
        recommended_review_share=best.review_share if best else None,
    )
