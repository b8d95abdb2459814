"""Today's feeds for the demo, made from the committed sample data, delivered to object storage.

A real feed delivers new business items every day. Replaying the same sample file would make
every run after the first one receive only items the ledger already finished, and Conveyor
rightly refuses such a run (a re-sent delivery). So each quickstart run delivers the sample data
as a new day's feed: fresh business keys (a new block of serial numbers, a suffix on invoice
numbers) and dates moved so the newest is today. The workflows treat it like any other feed.
Like a real feed, today's deliveries carry a few bad rows for the gate to quarantine and a person
to see.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_SERIAL = re.compile(r"^([A-Z]+)-(\d{4})-(\d+)$")


def next_delivery(home: Path) -> int:
    """A counter kept in ``home``: 1 for the first demo run, 2 for the next..."""
    counter = home / "demo_deliveries"
    number = int(counter.read_text()) + 1 if counter.exists() else 1
    home.mkdir(parents=True, exist_ok=True)
    counter.write_text(str(number))
    return number


def _shift_dates(text: str, days: int) -> str:
    def shifted(match: re.Match[str]) -> str:
        try:
            day = date(int(match[1]), int(match[2]), int(match[3]))
        except ValueError:
            return match[0]
        return (day + timedelta(days=days)).isoformat()

    return _ISO_DATE.sub(shifted, text)


def _newest_date(texts: list[str]) -> date | None:
    found = []
    for text in texts:
        for match in _ISO_DATE.finditer(text):
            try:
                found.append(date(int(match[1]), int(match[2]), int(match[3])))
            except ValueError:
                continue
    return max(found) if found else None


def renumber(key: str, delivery: int, today: date) -> str:
    """``EX-2026-000123`` -> ``EX-<year>-<delivery block><serial>``: new keys for each delivery."""
    match = _SERIAL.match(key)
    if not match:
        return f"{key}-D{delivery:03d}"
    width = len(match[3])
    serial = (delivery % 1000) * 10 ** (width - 3) + int(match[3]) % 10 ** (width - 3)
    return f"{match[1]}-{today.year}-{serial:0{width}d}"


def csv_delivery(
    source: Path, *, key: str, date_column: str, delivery: int, today: date,
    plant: Callable[[list[dict[str, Any]], date], None] | None = None,
) -> tuple[str, str]:
    """(file name, CSV text) of ``source`` as delivery ``delivery``: new keys, newest date today.

    :param plant: adds today's bad rows (a feed is never perfect).
    """
    with source.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise ValueError(f"sample extract {source} has no rows")
    dated = sorted(date.fromisoformat(r[date_column]) for r in rows if _ISO_DATE.fullmatch(r.get(date_column) or ""))
    # The newest ordinary date becomes today; a planted date far in the future stays in the future.
    typical = dated[int(len(dated) * 0.9)] if dated else today
    newest = max((d for d in dated if d <= typical + timedelta(days=7)), default=today)
    shift = (today - newest).days
    for row in rows:
        row[key] = renumber(row[key], delivery, today)
        if _ISO_DATE.fullmatch(row.get(date_column) or ""):
            row[date_column] = (date.fromisoformat(row[date_column]) + timedelta(days=shift)).isoformat()
    if plant is not None:
        plant(rows, today)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return f"{source.stem}_{today:%Y%m%d}_{delivery:03d}.csv", out.getvalue()


def plant_supplier_rows(rows: list[dict[str, Any]], today: date) -> None:
    """Three bad rows: a negative amount, a missing supplier, a date in the future."""
    if len(rows) > 123:
        rows[7]["amount"] = f"-{rows[7]['amount']}"
        rows[41]["supplier_id"] = ""
        rows[123]["exception_date"] = (today + timedelta(days=30)).isoformat()


def invoice_documents(source: Path, delivery: int, today: date) -> dict[str, str]:
    """The sample invoices as delivery ``delivery``: file name -> text (invoices dated yesterday)."""
    files = sorted(p for p in source.iterdir() if p.is_file())
    texts = [p.read_text(encoding="utf-8") for p in files]
    newest = _newest_date(texts) or today
    shift = (today - timedelta(days=1) - newest).days
    documents = {}
    for path, text in zip(files, texts, strict=True):
        number = f"{path.stem}-D{delivery:03d}"
        documents[f"{number}{path.suffix}"] = _shift_dates(text, shift).replace(path.stem, number)
    return documents
