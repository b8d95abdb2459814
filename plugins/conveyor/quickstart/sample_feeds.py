"""Today's feeds for the demo, made from the committed sample data.

A real feed delivers new business items every day. Replaying the same sample file would make
every run after the first one "receive" only items the ledger already finished, and Conveyor
rightly fails such a run (nothing new to draft, nothing to publish). So each quickstart run
delivers the sample data as a new day's feed: fresh business keys (a new block of exception
numbers, a suffix on invoice numbers) and dates moved so the newest is today. The workflows
treat it like any other feed. Like a real feed, today's extract carries a few bad rows (a negative
amount, a missing supplier, a date in the future) for the gate to quarantine and a person to see.
"""

from __future__ import annotations

import csv
import re
from datetime import date, timedelta
from pathlib import Path

_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_EXCEPTION_ID = re.compile(r"^EX-(\d{4})-(\d{6})$")


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


def supplier_extract(source: Path, target_dir: Path, delivery: int, today: date) -> Path:
    """The sample extract as delivery ``delivery``: exception ids in block ``delivery``, dates to today."""
    with source.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise ValueError(f"sample extract {source} has no rows")
    newest = max(date.fromisoformat(r["exception_date"]) for r in rows if r.get("exception_date"))
    shift = (today - newest).days
    for row in rows:
        match = _EXCEPTION_ID.match(row["exception_id"])
        if match:
            serial = (delivery % 1000) * 1000 + int(match[2]) % 1000
            row["exception_id"] = f"EX-{today.year}-{serial:06d}"
        if row.get("exception_date"):
            row["exception_date"] = (date.fromisoformat(row["exception_date"]) + timedelta(days=shift)).isoformat()
    if len(rows) > 123:
        rows[7]["amount"] = f"-{rows[7]['amount']}"
        rows[41]["supplier_id"] = ""
        rows[123]["exception_date"] = (today + timedelta(days=30)).isoformat()
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"supplier_exceptions_{today:%Y%m%d}_{delivery:03d}.csv"
    with target.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return target


def invoice_inbox(source: Path, inbox: Path, delivery: int, today: date) -> int:
    """Drop the sample invoices into ``inbox`` as delivery ``delivery``; return how many."""
    files = sorted(p for p in source.iterdir() if p.is_file())
    texts = [p.read_text(encoding="utf-8") for p in files]
    newest = _newest_date(texts) or today
    shift = (today - timedelta(days=1) - newest).days  # invoices are dated yesterday at the latest
    inbox.mkdir(parents=True, exist_ok=True)
    for path, text in zip(files, texts, strict=True):
        number = f"{path.stem}-D{delivery:03d}"
        content = _shift_dates(text, shift).replace(path.stem, number)
        (inbox / f"{number}{path.suffix}").write_text(content, encoding="utf-8")
    return len(files)
