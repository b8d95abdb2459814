"""A free TCP port for a server a test starts.

A port the kernel hands out for ``bind(('127.0.0.1', 0))`` is one of its ephemeral ports, the same
range it picks the local port of every outgoing connection from. Between the probe and the
server's own bind (seconds, for an Airflow api-server), any connection of the suite's other
workers can take it, and the server exits with "address already in use" (seen in CI: the wheel's
smoke test then waited 480 s on refused connections). A port below that range is never taken by
a connection; it is drawn at random so that the suite's processes do not all try the same one.
"""

from __future__ import annotations

import random
import socket

#: Below Linux's default ephemeral range (32768-60999), above the well-known and registered
#: services a test machine runs (PostgreSQL 5432, Redis 6379, RabbitMQ 5672/15672, Airflow 8080).
_RANGE = (20000, 32000)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, outside the ephemeral range."""
    for _ in range(200):
        port = random.randrange(*_RANGE)  # noqa: S311  (a port, not a secret)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_RANGE[0]}-{_RANGE[1]} after 200 tries")
