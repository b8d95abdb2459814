"""A real, native Airflow deployment inside pytest (see :mod:`tests.support.stack.stack`).

Modules: ``stack`` (``NativeStack``: the processes and their health), ``rest`` (the REST helpers),
``config`` (the components' environment), ``services`` (databases, Redis, S3), ``process`` (one child
process and its cleanup), ``polling`` (waits with a deadline).
"""

from __future__ import annotations

from tests.support.stack.polling import StackError
from tests.support.stack.stack import NativeStack, StackOptions

__all__ = ["NativeStack", "StackError", "StackOptions"]
