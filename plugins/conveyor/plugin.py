"""The Airflow plugin: registered once, through the ``airflow.plugins`` entry point.

Later parts (the review API and page, listeners) add themselves to the lists below; this module
stays thin and cheap to import.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin


class ConveyorPlugin(AirflowPlugin):
    """Conveyor's API, UI page and listeners inside Airflow."""

    name = "conveyor"
    fastapi_apps: list[dict[str, Any]] = []
    external_views: list[dict[str, Any]] = []
    listeners: list[Any] = []
