"""The stack's REST API as a test uses it: tokens, DAGs, runs, task instances, clearing.

Everything goes through Airflow's public API (``/api/v2``) with a simple-auth token, as the UI and
any client would; nothing reads the metadata DB directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from typing import Any

import httpx

from tests.support.stack.polling import StackError, wait_until

TERMINAL_RUN_STATES = frozenset({"success", "failed"})
TERMINAL_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


#: Seconds a call to the API server may take (token, request) before it is the fault.
_TIMEOUT = 30


class StackApi:
    """An authenticated view of one API server.

    :param url: the API server's base URL.
    :param passwords: user name -> password (simple auth manager).
    :param diagnostics: returns the log tails to put in an error (given the dag id and run id, if any).
    :param server_log: returns the tail of the API server's log (added to an error on a 5xx answer).
    """

    def __init__(
        self,
        url: str,
        passwords: Mapping[str, str],
        diagnostics: Callable[[str | None, str | None], str],
        server_log: Callable[[], str],
    ) -> None:
        self.url = url
        self.passwords = dict(passwords)
        self._diagnostics = diagnostics
        self._server_log = server_log
        self._clients: dict[str, httpx.Client] = {}

    # -- authentication ------------------------------------------------------------------------

    def token(self, user: str) -> str:
        """A fresh access token of ``user`` from ``POST /auth/token``."""
        response = httpx.post(
            f"{self.url}/auth/token", json={"username": user, "password": self.passwords[user]}, timeout=_TIMEOUT
        )
        if response.status_code not in (200, 201):
            raise StackError(f"token for {user!r}: {response.status_code} {response.text}")
        return str(response.json()["access_token"])

    def client(self, user: str = "admin") -> httpx.Client:
        """An ``httpx.Client`` on the API server, authenticated as ``user`` (one per user, reused)."""
        if user not in self._clients:
            self._clients[user] = httpx.Client(
                base_url=self.url, headers={"Authorization": f"Bearer {self.token(user)}"}, timeout=_TIMEOUT
            )
        return self._clients[user]

    def anonymous(self) -> httpx.Client:
        """A client without a token (for 401 checks); the caller closes it."""
        return httpx.Client(base_url=self.url, timeout=_TIMEOUT)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def _call(self, method: str, path: str, *, ok: Collection[int] = (200,), **kwargs: Any) -> Any:
        try:
            client = self.client()
            response = client.request(method, path, **kwargs)
        except httpx.TimeoutException as slow:
            # Not retried: an API server that takes 30 s to answer is the fault; the error says what
            # it and the machine were doing, so the next one can be found at its cause. (The client
            # is not asked for again here: that could ask the stalled server for a token.)
            raise StackError(
                f"{method} {path}: no answer in {_TIMEOUT} s ({slow!r}); "
                f"load average {os.getloadavg()}\n"
                f"{self._server_log()}"
            ) from slow
        if response.status_code not in ok:
            detail = f"\n{self._server_log()}" if response.status_code >= 500 else ""
            raise StackError(f"{method} {path}: {response.status_code} {response.text[:2000]}{detail}")
        return response.json() if response.content else None

    # -- DAGs ----------------------------------------------------------------------------------

    def import_errors(self) -> list[dict[str, Any]]:
        """The import errors the dag-processor recorded."""
        return list(self._call("GET", "/api/v2/importErrors", params={"limit": 100})["import_errors"])

    def wait_for_dag(self, dag_id: str, timeout: float = 120) -> dict[str, Any]:
        """Wait until ``dag_id`` is parsed and visible; fail at once on an import error of any file.

        :param dag_id: the DAG.
        :param timeout: seconds.
        :return: the DAG as ``GET /api/v2/dags/{dag_id}`` returns it.
        """

        def probe() -> dict[str, Any] | None:
            response = self.client().get(f"/api/v2/dags/{dag_id}")
            if response.status_code == 200:
                return dict(response.json())
            errors = self.import_errors()
            if errors:
                raise StackError(f"import errors while waiting for {dag_id}: {errors}")
            return None

        return wait_until(
            probe, timeout=timeout, interval=1, what=f"DAG {dag_id} to be parsed",
            on_timeout=lambda: self._diagnostics(dag_id, None),
        )

    def unpause(self, dag_id: str) -> None:
        """``PATCH /api/v2/dags/{dag_id}`` with ``is_paused: false``."""
        self._call("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})

    # -- runs ------------------------------------------------------------------------------------

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
        """Trigger a run as the UI's trigger form does (``logical_date: null``); return its run id."""
        run = self._call(
            "POST", f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": dict(conf or {})}
        )
        return str(run["dag_run_id"])

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """``GET /api/v2/dags/{dag_id}/dagRuns/{run_id}``."""
        return dict(self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}"))

    def wait_for_run(
        self, dag_id: str, run_id: str, states: Collection[str] = ("success",), timeout: float = 180
    ) -> dict[str, Any]:
        """Wait until the run is in one of ``states``; fail at once when it ends in another.

        :param dag_id: the DAG.
        :param run_id: the run.
        :param states: the run states that count as done.
        :param timeout: seconds.
        :return: the run.
        """

        def probe() -> dict[str, Any] | None:
            run = self.run(dag_id, run_id)
            if run["state"] in states:
                return run
            if run["state"] in TERMINAL_RUN_STATES:
                raise StackError(
                    f"run {dag_id}/{run_id} ended {run['state']} (wanted {sorted(states)}); task instances: "
                    f"{self.ti_states(dag_id, run_id)}\n{self._diagnostics(dag_id, run_id)}"
                )
            return None

        return wait_until(
            probe, timeout=timeout, interval=0.5, what=f"run {dag_id}/{run_id} to be {sorted(states)}",
            on_timeout=lambda: f"task instances: {self.ti_states(dag_id, run_id)}\n"
            + self._diagnostics(dag_id, run_id),
        )

    # -- task instances --------------------------------------------------------------------------

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """The run's task instances (``GET .../dagRuns/{run_id}/taskInstances``)."""
        body = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"limit": 1000})
        return list(body["task_instances"])

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        """One (unmapped) task instance."""
        return dict(self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"))

    def tries(self, dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
        """Every try of an (unmapped) task instance, oldest first, each with its state and hostname."""
        body = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/tries")
        return sorted(body["task_instances"], key=lambda t: int(t["try_number"]))

    def ti_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        """task id (with ``[map index]`` when mapped) -> state."""
        return {
            ti["task_id"] + (f"[{ti['map_index']}]" if ti["map_index"] >= 0 else ""): ti["state"]
            for ti in self.task_instances(dag_id, run_id)
        }

    def wait_for_task(
        self, dag_id: str, run_id: str, task_id: str, states: Collection[str], timeout: float = 120
    ) -> dict[str, Any]:
        """Wait until a task instance is in one of ``states``; fail at once when it ends in another.

        :return: the task instance.
        """

        def probe() -> dict[str, Any] | None:
            ti = self.task_instance(dag_id, run_id, task_id)
            if ti["state"] in states:
                return ti
            if ti["state"] in TERMINAL_TI_STATES:
                raise StackError(
                    f"task {dag_id}/{run_id}/{task_id} ended {ti['state']} (wanted {sorted(states)})\n"
                    + self._diagnostics(dag_id, run_id)
                )
            return None

        return wait_until(
            probe, timeout=timeout, interval=0.5, what=f"task {task_id} of {dag_id}/{run_id} to be {sorted(states)}",
            on_timeout=lambda: f"task instances: {self.ti_states(dag_id, run_id)}\n"
            + self._diagnostics(dag_id, run_id),
        )

    def clear(
        self, dag_id: str, run_id: str, task_ids: list[str] | None = None, include_downstream: bool = False
    ) -> list[dict[str, Any]]:
        """Clear task instances of one run through ``POST /api/v2/dags/{dag_id}/clearTaskInstances``.

        The body's defaults are a dry run of failed tasks only; this clears for real, whatever their
        state, and resets the run so the scheduler runs it again.

        :param dag_id: the DAG.
        :param run_id: the run.
        :param task_ids: the tasks to clear (all when None).
        :param include_downstream: also clear the tasks downstream of ``task_ids``.
        :return: the task instances cleared.
        """
        body: dict[str, Any] = {
            "dry_run": False,
            "dag_run_id": run_id,
            "only_failed": False,
            "reset_dag_runs": True,
            "include_downstream": include_downstream,
        }
        if task_ids is not None:
            body["task_ids"] = task_ids
        result = self._call("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances", json=body)
        return list(result["task_instances"])
