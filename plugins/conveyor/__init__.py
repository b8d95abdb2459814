"""Conveyor: guardrails around the AI steps of business workflows, for Apache Airflow 3.

Nothing is imported here on purpose: the ``conveyor`` CLI and DAG parsing must not pay for
Airflow, Great Expectations, pandas or model SDKs unless the code that needs them runs.
"""

from __future__ import annotations

__version__ = "0.1.0"
