"""conveyor.default_args: the retry policy a deployment tunes through ``[conveyor] retry_delay_seconds``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from conveyor import default_args


def test_the_first_retry_waits_a_minute_unless_the_deployment_says_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__CONVEYOR__RETRY_DELAY_SECONDS", raising=False)
    assert default_args()["retry_delay"] == timedelta(minutes=1)
    monkeypatch.setenv("AIRFLOW__CONVEYOR__RETRY_DELAY_SECONDS", "5")
    args = default_args(retries=4)
    assert (args["retries"], args["retry_delay"], args["retry_exponential_backoff"]) == (4, timedelta(seconds=5), True)
    assert default_args(retry_delay=timedelta(seconds=30))["retry_delay"] == timedelta(seconds=30)  # a DAG's own wins


def test_a_retry_delay_that_is_not_a_number_names_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__CONVEYOR__RETRY_DELAY_SECONDS", "five")
    with pytest.raises(ValueError, match=r"\[conveyor\] retry_delay_seconds must be a whole number, got 'five'"):
        default_args()
