"""The AI step in worker processes of their own, as Airflow runs it: forked, killable, separate."""

from __future__ import annotations

import multiprocessing as mp
import os
import traceback
from typing import Any

from tests.ai.seeding import context

FORK = mp.get_context("fork")


def _run(queue: Any, run_id: str, try_number: int, params: dict[str, Any]) -> None:
    from conveyor.ai.operators import AIStepOperator
    from conveyor_examples.supplier_exceptions import CLASSIFY_EXCEPTION

    try:
        operator = AIStepOperator(
            task_id="classify",
            workflow="supplier_exceptions",
            ai_task=CLASSIFY_EXCEPTION,
            run_id=run_id,
            **params,
        )
        summary = operator.execute(context(run_id, task_id="classify", try_number=try_number))
        queue.put(("success", summary))
    except Exception as exc:
        queue.put(("failed", f"{type(exc).__name__}: {exc}"))
    except BaseException:
        queue.put(("failed", traceback.format_exc()))
    finally:
        queue.close()
        queue.join_thread()


class Worker:
    """One task attempt of the AI step in a forked process."""

    def __init__(self, run_id: str, try_number: int = 1, **params: Any) -> None:
        self.queue = FORK.Queue()
        self.process = FORK.Process(target=_run, args=(self.queue, run_id, try_number, params), daemon=True)

    def start(self) -> Worker:
        self.process.start()
        return self

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def result(self, timeout: float = 120) -> tuple[str, Any]:
        outcome = self.queue.get(timeout=timeout)
        self.process.join(timeout=30)
        return outcome

    def kill(self) -> None:
        """kill -9: no cleanup, no commit, no goodbye."""
        os.kill(self.pid, 9)
        self.process.join(timeout=30)


def preload() -> None:
    """Import the model stack once in the parent, so forked workers start in milliseconds."""
    import airflow.providers.common.ai.hooks.pydantic_ai  # noqa: F401
    import pydantic_ai.direct  # noqa: F401

    import conveyor.ai.models.llm  # noqa: F401
    import conveyor.ai.operators  # noqa: F401
