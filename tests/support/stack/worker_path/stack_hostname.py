"""``[core] hostname_callable`` of the stack's Celery workers (this folder is their only PYTHONPATH entry).

All workers of a native stack run on one machine, so ``socket.getfqdn()`` would give every task
instance the same ``hostname``. Each worker is given a name of its own in ``CONVEYOR_STACK_HOSTNAME``;
Airflow stores it on the task instances the worker runs, which is how a test tells the workers apart.
Kept outside the ``tests`` package so that importing it costs nothing and pulls in no test code.
"""

from __future__ import annotations

import os


def hostname() -> str:
    """The worker's name, as set by the stack in its environment."""
    return os.environ["CONVEYOR_STACK_HOSTNAME"]
