"""Printing for the CLI: JSON for machines (``--json``), aligned text for people."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any

#: ``--full``: print whole texts in tables (set by ``conveyor.cli.main`` from the arguments).
FULL = False
#: How much of a text a table cell shows without ``--full``.
CELL_CHARS = 60


def positive_int(value: str) -> int:
    """An argparse type: a whole number above zero."""
    import argparse

    number = int(value)
    if number <= 0:
        raise argparse.ArgumentTypeError("must be a positive number")
    return number


def to_plain(value: Any) -> Any:
    """Dataclasses and datetimes as JSON-ready values."""
    if is_dataclass(value) and not isinstance(value, type):
        return to_plain(asdict(value))
    if isinstance(value, Mapping):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def print_json(value: Any) -> None:
    json.dump(to_plain(value), sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def print_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    cells = [[_cell(c) for c in row] for row in rows]
    cut = not FULL and any(len(str(c).replace("\n", " ")) > CELL_CHARS for row in rows for c in row if c is not None)
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    line = "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line.rstrip())
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if cut:
        print(f"(texts longer than {CELL_CHARS} characters are cut: --full prints them whole)")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:.2f}"
    text = str(value).replace("\n", " ")
    return text if FULL or len(text) <= CELL_CHARS else text[: CELL_CHARS - 3] + "..."
