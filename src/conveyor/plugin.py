"""The Airflow plugin: registered once, through the ``airflow.plugins`` entry point.

Later parts (the review API and page, listeners) add themselves to the lists below; this module
stays thin and cheap to import.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from conveyor.monitoring.deadlines import RunQueuedAt
from conveyor.monitoring.views import external_views as health_views
from conveyor.review import webapp


class ConveyorPlugin(AirflowPlugin):
    """Conveyor's API, UI page and listeners inside Airflow."""

    name = "conveyor"
    # The /conveyor app (built in the API server only); add routers in webapp.ROUTER_FACTORIES.
    fastapi_apps: list[dict[str, Any]] = webapp.fastapi_apps()
    # The health page (monitoring) beside the review pages; its routes join the app through
    # "conveyor.monitoring.api:create_router" in webapp.ROUTER_FACTORIES.
    external_views: list[dict[str, Any]] = webapp.external_views() + health_views(webapp.base_url_path)
    listeners: list[Any] = []
    # The bundled workflows' deadline reference (a failed run with an open deadline can be cleared).
    deadline_references: list[Any] = [RunQueuedAt]
