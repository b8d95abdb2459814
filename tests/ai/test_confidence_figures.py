"""Reasons that compare a confidence with its threshold show figures that differ."""

from __future__ import annotations

import pytest

from conveyor.ai.confidence import distinct_figures


@pytest.mark.parametrize(
    ("value", "bound", "expected"),
    [
        (0.6978, 0.7, ("0.698", "0.70")),  # the reported case: not "0.70 is below the threshold 0.70"
        (0.41, 0.8, ("0.41", "0.80")),
        (0.699991, 0.7, ("0.699991", "0.70")),
        (0.5449, 0.55, ("0.54", "0.55")),
        (0.12345, 0.1235, ("0.123450", "0.123500")),
    ],
)
def test_the_two_figures_differ(value, bound, expected):
    shown, limit = distinct_figures(value, bound)
    assert (shown, limit) == expected
    assert shown != limit


def test_values_equal_to_six_decimals_still_differ():
    shown, limit = distinct_figures(0.7 - 1e-9, 0.7)
    assert shown != limit and float(shown) < float(limit)
