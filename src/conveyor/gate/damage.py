"""A delivery that is not the text it claims to be: another format under a text name, a transfer cut
short or padded, an export still being written, two exports joined into one file.

Each of these is a fault of the whole delivery, not of some rows: the readers turn what these
functions find into a :class:`~conveyor.gate.errors.BatchRejected` that names the cause and the fix,
before a single row is judged. (A person told "row 481: exception_id is missing" about NUL padding
would look for a row that never existed; one told "the file ends in 512 NUL bytes: ask for it
again" knows what to do.)
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

#: Bytes a text export never starts with, and the format each announces.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip-compressed"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Excel workbook (.xls)"),
    (b"PAR1", "a Parquet file"),
    (b"%PDF-", "a PDF document"),
)
_ZIP = b"PK\x03\x04"
#: Bytes that may follow NUL padding and still leave the file padded (a line end written after it).
_LINE_ENDS = b"\r\n"


def binary_format(path: Path, head: bytes) -> str | None:
    """What ``path`` is when its first bytes ``head`` say it is not text (``"gzip-compressed"``,
    ``"an Excel workbook (.xlsx)"``...), else None."""
    if head.startswith(_ZIP):
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError):
            return "a damaged ZIP archive"
        if "xl/workbook.xml" in names:
            return "an Excel workbook (.xlsx)"
        if any(name.endswith(".ods") for name in names) or "content.xml" in names:
            return "an OpenDocument spreadsheet"
        return "a ZIP archive"
    for magic, description in _MAGIC:
        if head.startswith(magic):
            return description
    return None


def not_text_reason(name: str, found: str, expected: str) -> str:
    """The sentence for a delivery that is ``found`` where ``expected`` text was due."""
    if found.startswith("gzip"):
        fix = "deliver it uncompressed (the export compressed it but kept the name)"
    elif "Excel" in found or "spreadsheet" in found:
        fix = "save the sheet as 'CSV UTF-8' in the export instead"
    elif found == "a ZIP archive":
        fix = "unpack it and point the gate at the file inside"
    else:
        fix = "deliver the export itself, or name the file for what it is"
    return f"{name} is {found}, not {expected}; {fix}"


@dataclass
class TailScan:
    """The end of a file, followed block by block during the pass that hashes it: how many NUL
    bytes end it (line ends after them included) and how many lines come before them."""

    nul_bytes: int = 0
    #: newlines in the file before its trailing NUL run
    lines_before: int = 0
    ends_with_newline: bool = False
    content_seen: bool = False
    _newlines: int = 0

    def feed(self, block: bytes) -> None:
        body = block.rstrip(b"\x00" + _LINE_ENDS)
        tail = block[len(body):]
        if body:  # real content in this block: any padding seen before it was not at the end
            self._newlines += body.count(b"\n")
            self.lines_before = self._newlines
            self.nul_bytes = 0
            self.content_seen = True
        self.nul_bytes += tail.count(b"\x00")
        self._newlines += tail.count(b"\n")
        if block:
            self.ends_with_newline = block.endswith(b"\n")

    @property
    def lines(self) -> int:
        """Newlines in the whole file."""
        return self._newlines

    def padding_reason(self, name: str) -> str | None:
        """The sentence naming the padding, or None when the file does not end in NUL bytes."""
        if not self.nul_bytes:
            return None
        what = (f"ends in {self.nul_bytes:,} NUL byte(s) after line {self.lines_before + 1}"
                if self.content_seen else f"is nothing but {self.nul_bytes:,} NUL byte(s)")  # fmt: skip
        return (
            f"{name} {what}: the transfer was cut short or padded, so the file is damaged; "
            "ask the sender for the file again (no row of it was processed)"
        )


def cut_off_reason(name: str, line: int, fields: int, expected: int) -> str:
    """The sentence for a last line that stops mid-row with no line end."""
    return (
        f"the last line of {name} (line {line}) stops after {fields} of the header's {expected} fields, "
        "with no line end: the file is still being written or was cut short; clear the task once the "
        "export has finished, or ask the sender for the whole file"
    )


def repeated_header_rows(frame: pd.DataFrame, columns: list[str]) -> list[int]:
    """The row numbers (the frame's index) of rows whose every value is its column's name."""
    if not columns or frame.empty:
        return []
    first = columns[0]
    candidates = frame[frame[first] == first]  # one vectorised comparison; the rest on few rows
    if candidates.empty:
        return []
    same = (candidates[columns] == columns).all(axis=1)
    return [int(row) for row in candidates.index[same]]


def repeated_header_reason(name: str, rows: list[int]) -> str:
    """The sentence for data rows that repeat the header line."""
    more = f" ({len(rows)} times)" if len(rows) > 1 else ""
    return (
        f"data row {rows[0]} of {name} repeats the header line{more}: two exports were joined into one "
        "file, or a paged report repeats its header; deliver each export as a file of its own"
    )
