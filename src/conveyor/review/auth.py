"""Who may read and decide review items: Airflow's own auth manager, with the workflow as the DAG id.

Airflow does not authenticate plugin apps, so every Conveyor route depends on
:func:`authenticated_user` (the same JWT, from the ``Authorization: Bearer`` header or the UI's
``_token`` cookie, that Airflow's own API accepts: 401 without one) and the plugins view
permission; each route then checks the item's workflow as a DAG through :func:`require_dag_access`:
reading an item is ``GET`` on the DAG's human-in-the-loop details, deciding is ``PUT`` on them,
exactly as Airflow's own HITL endpoints do (403 without it).

These are internal Airflow modules: Conveyor pins Airflow's minor version and tests them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Literal

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.auth.managers.models.resource_details import AccessView, DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import get_user, requires_access_view
from fastapi import Depends, HTTPException, status

Method = Literal["GET", "PUT"]

#: The dependency of the whole Conveyor app: an authenticated user who may see plugin views.
require_plugin_view = Depends(requires_access_view(AccessView.PLUGINS))

CurrentUser = Annotated[BaseUser, Depends(get_user)]


def _team_names(workflows: Collection[str]) -> dict[str, str | None]:
    """The team owning each workflow's DAG, when Airflow runs in multi-team mode."""
    from airflow.configuration import conf

    if not workflows or not conf.getboolean("core", "multi_team", fallback=False):
        return {}
    from airflow.models.dag import DagModel

    return DagModel.get_dag_id_to_team_name_mapping(sorted(workflows))


def permitted_workflows(user: BaseUser, workflows: Collection[str], method: Method = "GET") -> set[str]:
    """The workflows among ``workflows`` whose DAG the user may read (GET) or act on (PUT)."""
    manager = get_auth_manager()
    teams = _team_names(workflows)
    return {
        workflow
        for workflow in workflows
        if manager.is_authorized_dag(
            method=method,
            access_entity=DagAccessEntity.HITL_DETAIL,
            details=DagDetails(id=workflow, team_name=teams.get(workflow)),
            user=user,
        )
    }


def require_dag_access(user: BaseUser, workflow: str, method: Method) -> None:
    """Raise 403 unless the user may ``method`` the review items of ``workflow``'s DAG."""
    if workflow not in permitted_workflows(user, [workflow], method):
        verb = "decide on" if method == "PUT" else "read"
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"forbidden: you may not {verb} review items of DAG {workflow!r}",
        )
