"""Monitoring of Conveyor workflows: throughput, exception rate, cycle time by stage, queue age.

Nothing is imported here on purpose: the CLI reads metrics without paying for Airflow, and only the
notifiers and the telemetry module import Airflow, inside the functions that need it.
"""

from __future__ import annotations
