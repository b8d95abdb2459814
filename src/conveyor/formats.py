"""How a value's expected form is spelled for people: the same words in a gate's reason and a
review form's hint, so a reviewer reads what the gate said."""

from __future__ import annotations


def human_format(fmt: str | None) -> str:
    """``%Y-%m-%d`` as ``YYYY-MM-DD``: how a data engineer spells a date format."""
    if not fmt or fmt == "ISO8601":
        return "ISO 8601"
    for code, word in (
        ("%Y", "YYYY"),
        ("%m", "MM"),
        ("%d", "DD"),
        ("%H", "hh"),
        ("%M", "mm"),
        ("%S", "ss"),
        ("%b", "Mon"),
        ("%y", "YY"),
    ):
        fmt = fmt.replace(code, word)
    return fmt
