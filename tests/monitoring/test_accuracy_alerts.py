"""The accuracy alert rules on snapshots: over the target, a significant rise, and too few spot checks."""

from __future__ import annotations

from conveyor.monitoring.accuracy import lower_bound, upper_bound
from conveyor.monitoring.alert_text import render_text
from conveyor.monitoring.alerts import Thresholds, evaluate
from conveyor.monitoring.metrics import utc
from conveyor.monitoring.snapshot import AccuracyComparison, AccuracyPeriod, HealthSnapshot, Throughput


def period(wrong: int, n: int, *, target: float | None = 0.05, recommended: float | None = 0.8) -> AccuracyPeriod:
    return AccuracyPeriod(
        answers=1000, passed=700, spot_checked=n, spot_wrong=wrong,
        passed_error_rate=wrong / n if n else None, passed_error_upper=upper_bound(wrong, n),
        passed_error_lower=lower_bound(wrong, n), exception_rate=0.2, max_error_rate=target,
        min_confidence=0.5, recommended_min_confidence=recommended, recommended_review_share=0.4,
    )  # fmt: skip


def snapshot(now: AccuracyPeriod, before: AccuracyPeriod) -> HealthSnapshot:
    """A health snapshot with nothing else to alert on: only the accuracy entry speaks."""
    return HealthSnapshot(
        workflow="supplier_exceptions", as_of=utc("2026-03-02T06:00:00+00:00"), done_status="published",
        throughput=Throughput(current=10),
        accuracy=(AccuracyComparison(step="classify_and_draft", days=7, now=now, before=before),),
    )


def test_an_upper_bound_over_the_target_alerts_with_the_numbers_and_the_command():
    [alert] = evaluate(snapshot(period(9, 60), period(7, 60)), Thresholds())
    assert (alert.rule, alert.subject, alert.severity) == ("passed_error", "classify_and_draft", "critical")
    text = render_text(alert)
    assert "9 of 60 spot checks wrong" in text and "above the declared max_error_rate 5.0%" in text
    assert "conveyor accuracy --workflow supplier_exceptions --step classify_and_draft" in text
    assert "min_confidence=0.80" in text and "7 of 60" in text  # the recommendation, the period before


def test_a_significant_rise_alerts_even_without_a_target():
    alerts = evaluate(snapshot(period(12, 60, target=None), period(1, 60, target=None)), Thresholds())
    [alert] = alerts
    assert alert.rule == "passed_error_rise" and "1.7% -> 20.0%" in alert.change
    assert alert.detail["p_value"] < 0.01


def test_too_few_spot_checks_or_a_rise_within_chance_raise_nothing():
    assert evaluate(snapshot(period(3, 10), period(0, 10)), Thresholds()) == []  # 10 < 20 spot checks
    assert evaluate(snapshot(period(2, 80, target=0.2), period(1, 80, target=0.2)), Thresholds()) == []
