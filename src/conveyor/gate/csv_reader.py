"""The CSV reader: a header row, comma-separated (or another ``delimiter``), UTF-8.

Its preflight proves more than the bytes: a header that is there, has no repeated column and is
not a report title; a last line not cut mid-row; a first data row without a surplus field (which
pandas would take as the index, shifting every column). Two exports joined into one file (the
header again further down) are refused chunk by chunk.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator

from conveyor.gate.damage import cut_off_reason, repeated_header_reason, repeated_header_rows
from conveyor.gate.errors import BatchRejected
from conveyor.gate.readers import ALTERNATIVE_DELIMITERS, READ_BLOCK, Chunk, SourceReader

_TOKENIZE_ERROR = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


class CsvReader(SourceReader):
    """CSV with a header row, comma-separated, UTF-8 (a BOM is accepted and dropped)."""

    kind = "csv"
    expected_text = "CSV text"
    delimiter = ","

    def preflight(self) -> None:
        self._check_file()
        self._hash_and_check_utf8(text=True)
        with self.path.open(encoding="utf-8-sig", newline="") as fh:
            first = fh.readline()
            try:
                record = next(csv.reader(fh, delimiter=self.delimiter), None)  # the first data row, quoted
            except csv.Error:
                record = None  # pandas' own reading names what is wrong with it
        self.header_line = first.rstrip("\r\n")
        if not self.header_line.strip():
            raise BatchRejected(
                "no_header",
                f"the first line of {self.path.name} is empty; expected the header row",
                input_hash=self.input_hash,
            )
        header = next(csv.reader([self.header_line], delimiter=self.delimiter))
        seen: dict[str, int] = {}
        for position, name in enumerate(header, start=1):
            if name in seen:
                raise BatchRejected(
                    "duplicate_columns",
                    f"column {name!r} appears twice in the header (positions {seen[name]} and {position})",
                    input_hash=self.input_hash,
                )
            seen[name] = position
        self.columns = header
        if len(header) == 1 and _splits_otherwise(self.header_line):
            return  # another delimiter: the gate's column check names it, with the columns it found
        self._check_last_line(len(header))
        if record is not None and len(header) == 1 < len(record):
            # A report title above the header ("Supplier exceptions - 3 Dec 2026"): not a quoting fault.
            raise BatchRejected(
                "no_header",
                f"the first line of {self.path.name} is not the header: {self.header_line[:80]!r} has 1 field, "
                f"the next line has {len(record)}; remove the title line above the header (export the data "
                "without a title)",
                input_hash=self.input_hash,
            )
        if record is not None and len(record) > len(header):
            # pandas would take the surplus first field as the index and shift every column of every
            # row ("exception_date '467.98' is not a date" 480 times): name the row, as for later ones.
            raise self._too_many_fields(2, len(record), len(header))

    def _check_last_line(self, expected: int) -> None:
        """A last line with too few fields and no line end: an export still being written, or cut."""
        if self.tail.ends_with_newline:
            return
        with self.path.open("rb") as fh:
            fh.seek(max(0, self._stat[0] - READ_BLOCK) if self._stat else 0)
            last = fh.read().rsplit(b"\n", 1)[-1].decode("utf-8", "replace").rstrip("\r")
        if last.count('"') % 2:
            return  # inside a quoted field: pandas names the open quote
        fields = len(next(csv.reader([last], delimiter=self.delimiter), []))
        if 0 < fields < expected:
            line = self.tail.lines + 1
            raise BatchRejected("incomplete", cut_off_reason(self.path.name, line, fields, expected),
                                detail={"line": line}, input_hash=self.input_hash)  # fmt: skip

    def chunks(self) -> Iterator[Chunk]:
        import pandas as pd

        reader = pd.read_csv(
            self.path,
            sep=self.delimiter,
            dtype=str,
            keep_default_na=False,
            na_values=[""],
            encoding="utf-8-sig",
            chunksize=self.chunk_size,
            engine="c",
        )
        start = 1
        try:
            with reader:
                for frame in reader:
                    frame.index = pd.RangeIndex(start, start + len(frame))
                    start += len(frame)
                    if repeated := repeated_header_rows(frame, self.columns):
                        raise BatchRejected("repeated_header", repeated_header_reason(self.path.name, repeated),
                                            detail={"rows": repeated[:20]}, input_hash=self.input_hash)  # fmt: skip
                    yield Chunk(frame)
        except pd.errors.ParserError as exc:
            raise self._parser_error(exc) from None

    def _parser_error(self, exc: Exception) -> BatchRejected:
        match = _TOKENIZE_ERROR.search(str(exc))
        if match:
            expected, line, saw = match.groups()
            return self._too_many_fields(int(line), int(saw), int(expected))
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return BatchRejected(
            "unreadable", f"{self.path.name} cannot be read as CSV: {first_line}", input_hash=self.input_hash
        )

    def _too_many_fields(self, line: int, saw: int, expected: int) -> BatchRejected:
        reason = (
            f"line {line} of {self.path.name} has {saw} fields, the header has {expected}: "
            f"probably a '{self.delimiter}' inside an unquoted text field; the file cannot be read "
            "reliably, fix the export's quoting"
        )
        return BatchRejected("unreadable", reason, detail={"line": line}, input_hash=self.input_hash)


def _splits_otherwise(line: str) -> bool:
    """Whether a line of one comma field splits into several on a delimiter exports use instead."""
    return any(len(next(csv.reader([line], delimiter=d))) > 1 for d in ALTERNATIVE_DELIMITERS)
