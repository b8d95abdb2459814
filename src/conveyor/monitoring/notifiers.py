"""Delivering alerts through Airflow notifiers, configured by Airflow connections and a Variable.

Channels (each used when configured):

* e-mail: the smtp provider's ``SmtpNotifier`` over the connection ``conveyor_smtp`` (its extra
  ``from_email`` is the sender), to the addresses in the Variable ``conveyor_alert_email``
  (comma-separated);
* webhook: :class:`AlertWebhookNotifier` posting JSON to the connection ``conveyor_alert_webhook``
  (extra ``url``, or ``schema``/``host``/``port`` plus extra ``endpoint``; optional extra
  ``headers``; a password is sent as a bearer token). The body has a ``text`` field, so a Slack or
  Teams incoming webhook accepts it as is.

Notifiers are called through ``notify()``, never ``__call__``: the latter renders every template
field with Jinja, and an alert's text carries item data (supplier ids, reasons) that must never be
evaluated as a template.

This module imports Airflow; only tasks import it.
"""

from __future__ import annotations

import html
import json
import logging
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from airflow.sdk import BaseHook, BaseNotifier, Context, Variable
from airflow.sdk.exceptions import AirflowNotFoundException

from conveyor.errors import MonitoringError
from conveyor.monitoring.alert_text import render_html, render_text, subject_line
from conveyor.monitoring.store import AlertEvent, MonitoringStore

EMAIL_CONN_ID = "conveyor_smtp"
WEBHOOK_CONN_ID = "conveyor_alert_webhook"
EMAIL_VARIABLE = "conveyor_alert_email"
DEFAULT_SENDER = "conveyor-alerts@localhost"

log = logging.getLogger(__name__)


class ChannelNotConfigured(MonitoringError, RuntimeError):
    """A channel is half-configured, or no channel is configured while alerts are due."""


class Channel(Protocol):
    name: str

    def send(self, event: AlertEvent, context: Mapping[str, Any]) -> None: ...

    def send_text(self, subject: str, text: str, context: Mapping[str, Any]) -> None: ...


def _opened(event: AlertEvent) -> str | None:
    return event.opened_at.isoformat() if event.opened_at else None


def _connection(conn_id: str) -> Any | None:
    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


class AlertWebhookNotifier(BaseNotifier):
    """POST one alert as JSON to the webhook of an Airflow connection.

    :param payload: the JSON body.
    :param conn_id: the connection holding the URL (see the module docstring).
    :param timeout: seconds to wait for the receiver.
    """

    # Nothing is templated: the payload carries item data.
    template_fields: Sequence[str] = ()

    def __init__(
        self, *, payload: Mapping[str, Any], conn_id: str = WEBHOOK_CONN_ID, timeout: float = 10
    ) -> None:
        super().__init__()
        self.payload = dict(payload)
        self.conn_id = conn_id
        self.timeout = timeout

    @staticmethod
    def url_of(conn: Any) -> str:
        """The webhook URL of a connection."""
        extra = conn.extra_dejson
        if extra.get("url"):
            return str(extra["url"])
        if not conn.host:
            raise ChannelNotConfigured(f"connection {conn.conn_id!r} has neither a host nor an extra 'url'")
        base: str
        if "://" in conn.host:
            base = str(conn.host).rstrip("/")
        else:
            scheme = conn.schema if conn.schema in {"http", "https"} else "https"
            base = f"{scheme}://{conn.host}" + (f":{conn.port}" if conn.port else "")
        endpoint = str(extra.get("endpoint") or "")
        return base + (endpoint if not endpoint or endpoint.startswith("/") else "/" + endpoint)

    def notify(self, context: Mapping[str, Any]) -> None:
        conn = BaseHook.get_connection(self.conn_id)
        headers = {"Content-Type": "application/json", **dict(conn.extra_dejson.get("headers") or {})}
        if conn.password:
            headers["Authorization"] = f"Bearer {conn.password}"
        request = urllib.request.Request(
            self.url_of(conn),
            data=json.dumps(self.payload, default=str).encode("utf-8"),
            headers=headers,
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - URL from a connection
            if not 200 <= response.status < 300:
                raise RuntimeError(f"webhook {self.conn_id!r} answered HTTP {response.status}")


@dataclass
class EmailChannel:
    """E-mail through ``SmtpNotifier`` on the ``conveyor_smtp`` connection."""

    recipients: list[str]
    sender: str
    conn_id: str = EMAIL_CONN_ID
    name: str = "email"

    def send(self, event: AlertEvent, context: Mapping[str, Any]) -> None:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        notifier = SmtpNotifier(
            to=self.recipients,
            from_email=self.sender,
            subject=subject_line(event.alert, event.kind),
            html_content=render_html(event.alert, event.kind, opened_at=_opened(event)),
            smtp_conn_id=self.conn_id,
            custom_headers={"X-Conveyor-Alert": f"{event.alert.workflow}/{event.alert.rule}/{event.kind}"},
        )
        # notify(), not __call__: no Jinja over item data. Airflow's Context is a TypedDict with every
        # key optional, so the task context's own keys (or none, outside a task) make one.
        notifier.notify(cast(Context, dict(context)))

    def send_text(self, subject: str, text: str, context: Mapping[str, Any]) -> None:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        SmtpNotifier(
            to=self.recipients, from_email=self.sender, subject=subject,
            html_content="<pre>" + html.escape(text) + "</pre>", smtp_conn_id=self.conn_id,
        ).notify(cast(Context, dict(context)))


@dataclass
class WebhookChannel:
    """JSON to the ``conveyor_alert_webhook`` connection."""

    conn_id: str = WEBHOOK_CONN_ID
    name: str = "webhook"

    def send(self, event: AlertEvent, context: Mapping[str, Any]) -> None:
        payload = {
            "text": render_text(event.alert, event.kind, opened_at=_opened(event)),
            "kind": event.kind,
            "event_id": event.id,
            "opened_at": _opened(event),
            "alert": event.alert.to_dict(),
        }
        AlertWebhookNotifier(payload=payload, conn_id=self.conn_id).notify(dict(context))

    def send_text(self, subject: str, text: str, context: Mapping[str, Any]) -> None:
        payload = {"text": f"{subject}\n{text}", "kind": "task_alert", "subject": subject}
        AlertWebhookNotifier(payload=payload, conn_id=self.conn_id).notify(dict(context))


def configured_channels() -> list[Channel]:
    """The channels configured in Airflow; a half-configured e-mail channel is an error.

    :raises ChannelNotConfigured: the SMTP connection exists without recipients, or the reverse.
    """
    channels: list[Channel] = []
    smtp = _connection(EMAIL_CONN_ID)
    recipients_value = Variable.get(EMAIL_VARIABLE, default=None)
    recipients = [r.strip() for r in str(recipients_value or "").replace(";", ",").split(",") if r.strip()]
    if smtp is not None and recipients:
        sender = smtp.extra_dejson.get("from_email") or DEFAULT_SENDER
        channels.append(EmailChannel(recipients=recipients, sender=sender))
    elif smtp is not None or recipients:
        missing = (
            f"the Variable {EMAIL_VARIABLE!r}" if smtp is not None else f"the connection {EMAIL_CONN_ID!r}"
        )
        raise ChannelNotConfigured(f"e-mail alerts are half-configured: set {missing}")
    webhook = _connection(WEBHOOK_CONN_ID)
    # A connection left without an address (as airflow_settings.yaml ships it) is not a channel.
    if webhook is not None and (webhook.host or webhook.extra_dejson.get("url")):
        channels.append(WebhookChannel())
    return channels


@dataclass
class Delivery:
    """What one delivery attempt did."""

    sent: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    channels: list[str] = field(default_factory=list)


def deliver(
    store: MonitoringStore,
    events: Sequence[AlertEvent],
    context: Mapping[str, Any],
    channels: Sequence[Channel] | None = None,
) -> Delivery:
    """Send every pending event on every channel; an event is marked sent only when all accepted it.

    :raises ChannelNotConfigured: events are due and no channel is configured (silence is not success).
    """
    from conveyor.monitoring.telemetry import count_alert

    pending = [e for e in events if e.state == "pending"]
    channels = list(channels) if channels is not None else configured_channels()
    result = Delivery(channels=[c.name for c in channels])
    if not channels:
        log.warning("no alert channel is configured: alerts would reach nobody")
    if not pending:
        return result
    if not channels:
        raise ChannelNotConfigured(
            f"{len(pending)} alert(s) are due and no alert channel is configured: set the connection "
            f"{EMAIL_CONN_ID!r} and the Variable {EMAIL_VARIABLE!r}, or the connection {WEBHOOK_CONN_ID!r}"
        )
    for event in pending:
        errors = []
        for channel in channels:
            try:
                channel.send(event, context)
            except Exception as exc:  # one bad channel must not silence the others
                errors.append(f"{channel.name}: {type(exc).__name__}: {exc}")
        if errors:
            result.failed[event.id] = "; ".join(errors)
            continue
        if store.mark_sent(event, [c.name for c in channels]):
            count_alert(event.alert.workflow, event.alert.rule)
        result.sent.append(event.id)
    return result


def notify_people(subject: str, text: str, context: Mapping[str, Any]) -> list[str]:
    """Send a plain message (a failed step, a missed deadline) on every configured channel.

    :return: the channels that accepted it.
    :raises ChannelNotConfigured: no channel is configured (the message would reach nobody).
    """
    channels = configured_channels()
    if not channels:
        raise ChannelNotConfigured(
            f"no alert channel is configured, so nobody hears: {subject}. Set the connection "
            f"{EMAIL_CONN_ID!r} and the Variable {EMAIL_VARIABLE!r}, or the connection {WEBHOOK_CONN_ID!r}"
        )
    sent, errors = [], []
    for channel in channels:
        try:
            channel.send_text(subject, text, context)
            sent.append(channel.name)
        except Exception as exc:  # one bad channel must not silence the others
            errors.append(f"{channel.name}: {type(exc).__name__}: {exc}")
    if errors and not sent:
        raise RuntimeError(f"no channel accepted the alert {subject!r}: {'; '.join(errors)}")
    for error in errors:
        log.error("alert channel failed: %s", error)
    return sent
