"""Real receivers on 127.0.0.1 for the monitoring tests: SMTP (aiosmtpd), a webhook and an OTLP endpoint."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from conveyor.quickstart.api_server import free_port


@dataclass
class Mailbox:
    """Every message the SMTP server accepted."""

    messages: list[EmailMessage] = field(default_factory=list)
    recipients: list[list[str]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd handler hook
        self.messages.append(
            message_from_bytes(envelope.original_content or envelope.content, policy=policy.default)
        )
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 Message accepted for delivery"

    def alerts(self) -> list[tuple[str, str, str]]:
        """(workflow, rule, kind) of each alert mail, from its X-Conveyor-Alert header."""
        return [tuple(str(m["X-Conveyor-Alert"]).split("/")) for m in self.messages]  # type: ignore[misc]

    def body(self, message: EmailMessage) -> str:
        part = message.get_body(preferencelist=("html", "plain"))
        return part.get_content() if part is not None else ""


@contextmanager
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    """An aiosmtpd server on 127.0.0.1 (plain SMTP, no TLS, no auth)."""
    from aiosmtpd.controller import Controller

    box = Mailbox()
    port = free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()


@dataclass
class Inbox:
    """Every request body an HTTP receiver accepted."""

    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)

    def json_bodies(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, _, body in self.requests]


@contextmanager
def http_receiver(status: int = 200) -> Iterator[tuple[Inbox, int]]:
    """An HTTP server on 127.0.0.1 that records every POST and answers ``status``."""
    inbox = Inbox()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            inbox.requests.append((self.path, dict(self.headers.items()), body))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield inbox, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def otlp_metrics(inbox: Inbox) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Decode OTLP/HTTP metric exports: name -> [(attributes, value)]; a histogram's value is its count."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for path, _, body in inbox.requests:
        if not path.endswith("/v1/metrics"):
            continue
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    if kind not in {"gauge", "sum", "histogram", "exponential_histogram"}:
                        continue
                    for point in getattr(metric, kind).data_points:
                        attrs = {a.key: a.value.string_value for a in point.attributes}
                        if kind.endswith("histogram"):  # timings: the number of observations
                            value = float(point.count)
                        else:
                            value = (
                                point.as_double
                                if point.WhichOneof("value") == "as_double"
                                else float(point.as_int)
                            )
                        found.setdefault(metric.name, []).append((attrs, value))
    return found
