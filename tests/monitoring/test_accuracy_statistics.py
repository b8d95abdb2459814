"""The estimate against a synthetic model whose wrong answers are known: does the bound hold?

Pure Python, no ledger: the tallies and labels an AI step and its reviewers would record are built
from a model whose chance of a wrong answer at each confidence is known, decided by a reviewer who
always tells right from wrong. Over 200 seeded runs, the 95% upper bound of the passed error rate
must cover the true error of what passed in at least 93% of them, and the recommended threshold
must keep the true error of held-out answers under the target in at least 90%.
"""

from __future__ import annotations

import bisect
import random
from datetime import UTC, datetime

import pytest

from conveyor.ledger.ai_labels import BUCKETS, AnswerLabel, StepTally, bucket
from conveyor.monitoring.accuracy import estimate, lower_bound, rise_p_value, upper_bound

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MIN_CONFIDENCE = 0.6
SPOT_CHECK = 0.2
TARGET = 0.04
RUNS = 200


def wrong_chance(confidence: float) -> float:
    """The synthetic model: often wrong when unsure, rarely when sure."""
    return 0.6 * (1 - confidence) ** 2


def answers(rng: random.Random, n: int) -> list[tuple[float, bool]]:
    out = []
    for _ in range(n):
        confidence = rng.random() ** 0.4  # most answers sure, a long tail of unsure ones
        out.append((confidence, rng.random() < wrong_chance(confidence)))
    return out


def label(n: int, confidence: float, wrong: bool, *, spot: bool) -> AnswerLabel:
    return AnswerLabel(
        item_id=f"wf:{n}", workflow="wf", step="classify", run_id="r", routed_at=T0,
        outcome="wrong" if wrong else "right", fields=["category"] if wrong else [], confidence=confidence,
        failed_checks=[] if spot else ["low_confidence"], spot_check=spot, share=SPOT_CHECK if spot else 1.0,
        decided_by="reviewer:test", decided_at=T0,
    )  # fmt: skip


def one_run(rng: random.Random, n: int = 4000):
    """What the step and a perfect reviewer record for one period, and the true passed error."""
    tally = StepTally(
        workflow="wf", step="classify", run_id="r", min_confidence=MIN_CONFIDENCE, spot_check=SPOT_CHECK,
        max_error_rate=TARGET, seed="s", at=T0,
    )  # fmt: skip
    labels, passed_wrong, passed = [], 0, 0
    counts = {"passed": 0, "spot": 0, "exceptions": 0}
    for number, (confidence, wrong) in enumerate(answers(rng, n)):
        if confidence < MIN_CONFIDENCE:
            counts["exceptions"] += 1
            tally.low_only_by_confidence[bucket(confidence)] += 1
            labels.append(label(number, confidence, wrong, spot=False))
            continue
        passed += 1
        passed_wrong += wrong
        tally.passed_by_confidence[bucket(confidence)] += 1
        if rng.random() < SPOT_CHECK:
            counts["spot"] += 1
            labels.append(label(number, confidence, wrong, spot=True))
        else:
            counts["passed"] += 1
    tally = StepTally(
        **{**tally.__dict__, "passed": counts["passed"], "spot_checked": counts["spot"],
           "exceptions": counts["exceptions"]}
    )  # fmt: skip
    return tally, labels, passed_wrong / passed


class HeldOut:
    """Answers none of the runs saw (drawn once): the true error of what a threshold lets pass."""

    def __init__(self, n: int = 200_000) -> None:
        self.answers = sorted(answers(random.Random(-1), n))
        self.wrong_after = [0] * (n + 1)  # wrong answers from position i on
        for i in range(n - 1, -1, -1):
            self.wrong_after[i] = self.wrong_after[i + 1] + self.answers[i][1]

    def error(self, threshold: float) -> float:
        first = bisect.bisect_left(self.answers, (threshold, False))
        return self.wrong_after[first] / (len(self.answers) - first)


def test_the_bound_covers_the_true_passed_error_and_the_recommendation_keeps_the_target():
    held_out = HeldOut()
    covered = kept = recommended = 0
    shares = []
    for run in range(RUNS):
        rng = random.Random(run)
        tally, labels, true_error = one_run(rng)
        found = estimate([tally], labels, workflow="wf", step="classify", since=T0, until=T0)
        assert found.spot_checked == tally.spot_checked and found.answers == 4000
        covered += found.passed_error_upper >= true_error
        if found.recommended_min_confidence is not None:
            recommended += 1
            shares.append(found.recommended_review_share)
            kept += held_out.error(found.recommended_min_confidence) <= TARGET
    print(f"bound covered the true passed error in {covered}/{RUNS} runs; a threshold was recommended in "
          f"{recommended}; it kept held-out error under target in {kept}; median review share "
          f"{sorted(shares)[len(shares) // 2] if shares else float('nan'):.2f}")
    assert covered / RUNS >= 0.93, f"the 95% bound covered the true passed error in {covered} of {RUNS} runs"
    assert recommended >= 0.9 * RUNS, f"a threshold was recommended in only {recommended} of {RUNS} runs"
    # a run with no recommendation counts as a miss: the owner is left without a threshold
    assert kept / RUNS >= 0.90, f"the recommended threshold kept held-out error under target in {kept} of {RUNS}"
    # and it is not the trivial answer (review everything): the median review share stays usable
    assert sorted(shares)[len(shares) // 2] < 0.6


def test_exact_bounds_match_known_values():
    # Clopper–Pearson one-sided 95%: 0 of n -> 1 - 0.05^(1/n) (the "rule of three" ~ 3/n)
    assert upper_bound(0, 100) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-9)
    # 2 of 50: the published one-sided 95% interval is (0.0071, 0.1211)
    assert upper_bound(2, 50) == pytest.approx(0.1211, abs=5e-4)
    assert lower_bound(2, 50) == pytest.approx(0.0071, abs=5e-4)
    assert upper_bound(0, 0) == 1.0 and upper_bound(5, 5) == 1.0 and lower_bound(0, 10) == 0.0


def test_a_rise_is_significant_only_when_the_counts_say_so():
    assert rise_p_value((2, 200), (20, 200)) < 0.001
    assert rise_p_value((2, 200), (3, 200)) > 0.3
    assert rise_p_value((10, 200), (2, 200)) > 0.9


def test_histograms_have_one_bucket_per_hundredth():
    assert BUCKETS == 101 and bucket(0.999) == 99 and bucket(1.0) == 100 and bucket(None) == 0
