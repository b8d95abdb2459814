"""An alert as a person reads it: the subject line, a plain-text body (webhooks, logs) and an HTML
e-mail body, every value escaped (item data can hold markup)."""

from __future__ import annotations

import html

from conveyor.monitoring.alert_model import Alert

_KIND_WORDS = {"fired": "", "repeated": "still firing: ", "resolved": "resolved: "}


def subject_line(alert: Alert, kind: str = "fired") -> str:
    """An e-mail subject / chat headline."""
    label = "resolved" if kind == "resolved" else alert.severity
    return f"[Conveyor {label}] {_KIND_WORDS.get(kind, '')}{alert.title}"


def render_text(alert: Alert, kind: str = "fired", *, opened_at: str | None = None) -> str:
    """The alert as plain text (webhooks, logs)."""
    lines = [subject_line(alert, kind)]
    if kind == "resolved":
        lines.append(f"The condition has cleared (first raised {opened_at or 'earlier'}). Last known state:")
    elif kind == "repeated":
        lines.append(f"This condition has been firing since {opened_at or 'earlier'}.")
    lines += [
        f"What moved: {alert.what}",
        f"By how much: {alert.change}",
        f"Compared with: {alert.compared_with}",
        "Where to look:",
        *(f"  - {w}" for w in alert.where),
        f"(rule {alert.rule}, workflow {alert.workflow}{', ' + alert.subject if alert.subject else ''}, "
        f"evaluated at {alert.as_of})",
    ]
    return "\n".join(lines)


def render_html(alert: Alert, kind: str = "fired", *, opened_at: str | None = None) -> str:
    """The alert as an HTML e-mail body; every value is escaped (item data can hold markup)."""
    e = html.escape
    intro = ""
    if kind == "resolved":
        intro = (
            f"<p>The condition has cleared (first raised {e(opened_at or 'earlier')}). Last known state:</p>"
        )
    elif kind == "repeated":
        intro = f"<p>This condition has been firing since {e(opened_at or 'earlier')}.</p>"
    rows = "".join(
        f"<tr><th align='left' valign='top'>{e(name)}</th><td>{e(value)}</td></tr>"
        for name, value in (
            ("What moved", alert.what),
            ("By how much", alert.change),
            ("Compared with", alert.compared_with),
        )
    )
    where = "".join(f"<li>{e(w)}</li>" for w in alert.where)
    return (
        f"<h3>{e(subject_line(alert, kind))}</h3>{intro}<table>{rows}</table>"
        f"<p><b>Where to look</b></p><ul>{where}</ul>"
        f"<p><small>rule {e(alert.rule)} · workflow {e(alert.workflow)}"
        f"{' · ' + e(alert.subject) if alert.subject else ''} · evaluated at {e(alert.as_of)}</small></p>"
    )
