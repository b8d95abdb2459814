"""Keep a command's own output alone on stdout while Airflow runs inside it.

Airflow's loggers write to stdout. The deploy commands print one result line (a summary, or a URI
that a shell captures with ``$(...)``), so everything written while Airflow works is sent to stderr
at the file-descriptor level, which also covers loggers that kept a reference to ``sys.stdout``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send whatever is written to stdout (fd 1) inside the block to stderr (fd 2)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
