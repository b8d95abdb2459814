"""Readers: turn a gate input (CSV, JSON lines, Parquet, a SQL query) into chunks of rows.

Every reader first runs :meth:`SourceReader.preflight`: one streaming pass over the bytes that
computes the input hash and proves the file is readable (exists, not empty, valid UTF-8, a header
the gate can split). A problem found there is a :class:`~conveyor.gate.errors.BatchRejected`
with a message naming the byte, line or column at fault. Then :meth:`SourceReader.chunks` yields
``pandas`` frames of at most ``chunk_size`` rows whose index is the 1-based data row number, so
a failure can always be pointed at ("row 57").

Values are read as text (CSV) or as stored (JSON lines, Parquet); the suite's column types are
applied afterwards (:mod:`conveyor.gate.columns`), so a bad value is a row-level finding, not a
read error.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conveyor.gate.damage import (
    TailScan,
    binary_format,
    cut_off_reason,
    not_text_reason,
    repeated_header_reason,
    repeated_header_rows,
)
from conveyor.gate.errors import BatchRejected

if TYPE_CHECKING:
    import pandas as pd

#: Rows per chunk: large enough that Great Expectations' fixed cost per validation (it builds a
#: metric graph and fingerprints the frame on every run) stays small next to the work, small
#: enough that a chunk of a wide extract stays in the low hundreds of MB.
DEFAULT_CHUNK_SIZE = 250_000
_BLOCK = 1 << 20
_BOM = codecs.BOM_UTF8
#: Delimiters a mis-configured export tends to use instead of a comma.
ALTERNATIVE_DELIMITERS = (";", "\t", "|")
_TOKENIZE_ERROR = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


@dataclass
class Chunk:
    """Rows of the input.

    :param frame: the rows; the index is the 1-based data row number in the whole input.
    :param item_ids: in ledger mode, the item id of each row (same order as ``frame``).
    """

    frame: pd.DataFrame
    item_ids: list[str] | None = None


@dataclass
class SourceReader:
    """Base class of the readers; see the module docstring for the contract."""

    path: Path
    chunk_size: int = DEFAULT_CHUNK_SIZE
    input_hash: str = ""
    columns: list[str] = field(default_factory=list)
    #: the first line of a text file as read (for delimiter hints)
    header_line: str | None = None
    #: facts worth reporting about the input (BOM, size...)
    notes: dict[str, Any] = field(default_factory=dict)
    _stat: tuple[int, int] | None = None
    #: where the input really lives, when ``path`` is a local copy of an object-storage file
    origin: str | None = None
    #: how a text file ends (NUL padding, a last line end), seen by the hashing pass
    tail: TailScan = field(default_factory=TailScan)

    kind = "file"
    #: what a person should have delivered, in a sentence naming what came instead
    expected_text = "text"

    @property
    def description(self) -> str:
        return self.origin or str(self.path)

    def preflight(self) -> None:
        raise NotImplementedError

    def chunks(self) -> Iterator[Chunk]:
        raise NotImplementedError

    def close(self) -> None:
        """Release anything the reader holds (temporary files)."""

    def unchanged_since_preflight(self) -> bool:
        """Whether the file still has the size and mtime it had at preflight."""
        return self._stat is None or self._stat == _stat(self.path)

    # -- shared steps ------------------------------------------------------------------------

    def _check_file(self) -> None:
        if not self.path.exists():
            raise BatchRejected("not_found", f"input file not found: {self.path}")
        if not self.path.is_file():
            raise BatchRejected("not_found", f"input path is not a file: {self.path}")
        self._stat = _stat(self.path)
        self.notes["size_bytes"] = self._stat[0]
        if self._stat[0] == 0:
            raise BatchRejected(
                "empty",
                f"input file is empty (0 bytes): {self.path}; an empty extract is never a success, "
                "check the export job that writes it",
                input_hash=hashlib.sha256(b"").hexdigest(),
            )

    def _hash_and_check_utf8(self, *, text: bool) -> None:
        """sha256 of the bytes; for text files also prove they are UTF-8 (a BOM is accepted)."""
        digest = hashlib.sha256()
        decoder = codecs.getincrementaldecoder("utf-8")("strict")
        offset = 0
        newlines = 0
        with self.path.open("rb") as fh:
            while block := fh.read(_BLOCK):
                digest.update(block)
                if text and not offset and (found := binary_format(self.path, block[:8])):
                    self.input_hash = _finish_hash(digest, fh)
                    raise BatchRejected("not_text", not_text_reason(self.path.name, found, self.expected_text),
                                        input_hash=self.input_hash)  # fmt: skip
                if text:
                    self.tail.feed(block)
                    try:
                        decoder.decode(block)
                    except UnicodeDecodeError as exc:
                        self.input_hash = _finish_hash(digest, fh)
                        raise self._encoding_error(block, exc, offset, newlines) from None
                    newlines += block.count(b"\n")
                offset += len(block)
            if text:
                try:
                    decoder.decode(b"", final=True)
                except UnicodeDecodeError as exc:
                    self.input_hash = digest.hexdigest()
                    raise self._encoding_error(b"", exc, offset, newlines) from None
        self.input_hash = digest.hexdigest()
        if text:
            if padding := self.tail.padding_reason(self.path.name):
                raise BatchRejected("damaged", padding, detail={"nul_bytes": self.tail.nul_bytes},
                                    input_hash=self.input_hash)  # fmt: skip
            with self.path.open("rb") as fh:
                self.notes["bom"] = fh.read(3) == _BOM

    def _encoding_error(
        self, block: bytes, exc: UnicodeDecodeError, offset: int, newlines: int
    ) -> BatchRejected:
        bad_at = offset + exc.start
        line = newlines + block.count(b"\n", 0, exc.start) + 1
        start = block.rfind(b"\n", 0, exc.start) + 1
        end = block.find(b"\n", exc.start)
        context = block[start : end if end != -1 else len(block)][:120]
        try:
            guess = context.decode("cp1252")
            hint = f"; the line reads as Windows-1252/Latin-1: {guess!r}"
        except UnicodeDecodeError:
            hint = ""
        return BatchRejected(
            "encoding",
            f"input file is not valid UTF-8: byte 0x{block[exc.start]:02x} at line {line} "
            f"(byte offset {bad_at}){hint}; re-export the file as UTF-8",
            detail={"byte_offset": bad_at, "line": line},
            input_hash=self.input_hash or None,
        )


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
            fh.seek(max(0, self._stat[0] - _BLOCK) if self._stat else 0)
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


class JsonLinesReader(SourceReader):
    """One JSON object per line, UTF-8. Columns are the keys of the objects, in first-seen order."""

    kind = "jsonl"
    expected_text = "JSON lines text"

    def preflight(self) -> None:
        self._check_file()
        self._hash_and_check_utf8(text=True)
        keys: dict[str, None] = {}
        for _, record in self._records(limit=self.chunk_size):
            keys.update(dict.fromkeys(record))
        self.columns = list(keys)

    def _records(self, limit: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        count = 0
        with self.path.open(encoding="utf-8-sig") as fh:
            for line_number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    # NaN/Infinity kept as the text they were: the column's type check names them.
                    record = json.loads(line, parse_constant=str)
                except json.JSONDecodeError as exc:
                    raise BatchRejected(
                        "unreadable",
                        f"line {line_number} of {self.path.name} is not valid JSON "
                        f"({exc.msg} at column {exc.colno})",
                        detail={"line": line_number},
                        input_hash=self.input_hash,
                    ) from None
                if not isinstance(record, dict):
                    raise BatchRejected(
                        "unreadable",
                        f"line {line_number} of {self.path.name} is a JSON {type(record).__name__}, "
                        "expected one object per line",
                        detail={"line": line_number},
                        input_hash=self.input_hash,
                    )
                yield line_number, record
                count += 1
                if limit is not None and count >= limit:
                    return

    def chunks(self) -> Iterator[Chunk]:
        import pandas as pd

        batch: list[dict[str, Any]] = []
        start = 1
        for _, record in self._records():
            batch.append(record)
            if len(batch) >= self.chunk_size:
                yield Chunk(_records_frame(batch, self.columns, start))
                start += len(batch)
                batch = []
        if batch:
            yield Chunk(_records_frame(batch, self.columns, start))
        elif start == 1:
            yield Chunk(pd.DataFrame(columns=self.columns))


class ParquetReader(SourceReader):
    """A Parquet file, read in row batches through pyarrow."""

    kind = "parquet"

    def preflight(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._check_file()
        self._hash_and_check_utf8(text=False)
        try:
            self.columns = list(pq.ParquetFile(self.path).schema_arrow.names)
        except (pa.ArrowException, OSError) as exc:
            raise BatchRejected(
                "unreadable",
                f"{self.path.name} is not a readable Parquet file: {exc}",
                input_hash=self.input_hash,
            ) from None

    def chunks(self) -> Iterator[Chunk]:
        import pandas as pd
        import pyarrow.parquet as pq

        start = 1
        produced = False
        with pq.ParquetFile(self.path) as pf:
            for batch in pf.iter_batches(batch_size=self.chunk_size):
                frame = batch.to_pandas()
                frame.index = pd.RangeIndex(start, start + len(frame))
                start += len(frame)
                produced = True
                yield Chunk(frame)
        if not produced:
            yield Chunk(pd.DataFrame(columns=self.columns))


class SqlReader(ParquetReader):
    """The rows of a SQL query on a Postgres connection, snapshotted once to a local Parquet file.

    The query runs once, through a server-side cursor (bounded memory); both gate passes then
    read the same snapshot, so rows cannot change between validating and routing them. Values are
    kept as text (dates in ISO form), like a CSV export of the same query.

    :param sql: the query.
    :param conn_id: the Airflow connection of the database (``AIRFLOW_CONN_<ID>`` outside Airflow).
    """

    kind = "sql"

    def __init__(self, sql: str, conn_id: str, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        super().__init__(path=Path(tempfile.gettempdir()), chunk_size=chunk_size)
        self.sql = sql
        self.conn_id = conn_id
        self._tmp: Path | None = None

    @property
    def description(self) -> str:
        return f"sql[{self.conn_id}]: {' '.join(self.sql.split())[:200]}"

    def preflight(self) -> None:
        import psycopg
        import pyarrow as pa
        import pyarrow.parquet as pq

        from conveyor.ledger.connection import resolve_dsn

        fd, name = tempfile.mkstemp(prefix="conveyor-gate-", suffix=".parquet")
        os.close(fd)
        self._tmp = Path(name)
        self.path = self._tmp
        digest = hashlib.sha256()
        rows_total = 0
        try:
            with psycopg.connect(resolve_dsn(None, conn_id=self.conn_id), connect_timeout=10) as conn:
                with conn.cursor(name="conveyor_gate") as cur:
                    cur.itersize = self.chunk_size
                    cur.execute(self.sql)
                    rows = cur.fetchmany(self.chunk_size)
                    self.columns = [d.name for d in cur.description or []]
                    schema = pa.schema([(c, pa.string()) for c in self.columns])
                    digest.update(json.dumps(self.columns).encode())
                    with pq.ParquetWriter(self._tmp, schema) as writer:
                        while rows:
                            text_rows = [[_sql_text(v) for v in row] for row in rows]
                            for row in text_rows:
                                digest.update(json.dumps(row, ensure_ascii=False).encode())
                            writer.write_table(pa.table(list(zip(*text_rows, strict=True)), schema=schema))
                            rows_total += len(rows)
                            rows = cur.fetchmany(self.chunk_size)
        except psycopg.Error as exc:
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BatchRejected(
                "unreadable", f"the source query failed on connection {self.conn_id!r}: {first_line}"
            ) from None
        self.input_hash = digest.hexdigest()
        self.notes["rows"] = rows_total
        self._stat = None

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None


def _sql_text(value: Any) -> str | None:
    if value is None:
        return None
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)


def _records_frame(records: Sequence[dict[str, Any]], columns: Sequence[str], start: int) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame.from_records(records)
    frame.index = pd.RangeIndex(start, start + len(frame))
    for column in columns:
        if column not in frame.columns:
            frame[column] = None
    return frame


def _splits_otherwise(line: str) -> bool:
    """Whether a line of one comma field splits into several on a delimiter exports use instead."""
    return any(len(next(csv.reader([line], delimiter=d))) > 1 for d in ALTERNATIVE_DELIMITERS)


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _finish_hash(digest: Any, fh: Any) -> str:
    while block := fh.read(_BLOCK):
        digest.update(block)
    return str(digest.hexdigest())


def reader_for(
    source: str | None,
    *,
    sql: str | None = None,
    conn_id: str = "postgres_default",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    file_format: str | None = None,
    origin: str | None = None,
) -> SourceReader:
    """The reader for a file path (by extension, or ``file_format``) or a SQL query.

    :param origin: the object-storage URL ``source`` is a local copy of (shown in messages).
    """
    from conveyor.gate.paths import resolve_path

    if sql:
        return SqlReader(sql, conn_id, chunk_size=chunk_size)
    if not source:
        raise BatchRejected(
            "not_found", "no input: give the gate a file path (source=...) or a query (sql=...)"
        )
    path = resolve_path(source)
    fmt = (file_format or path.suffix.lstrip(".")).lower()
    readers: dict[str, type[SourceReader]] = {
        "csv": CsvReader,
        "jsonl": JsonLinesReader,
        "ndjson": JsonLinesReader,
        "json": JsonLinesReader,
        "parquet": ParquetReader,
        "pq": ParquetReader,
    }
    if fmt not in readers:
        raise BatchRejected(
            "unreadable",
            f"cannot tell the format of {path.name!r} (extension {path.suffix or 'none'!r}); "
            "use .csv, .jsonl or .parquet, or pass file_format",
        )
    return readers[fmt](path=path, chunk_size=chunk_size, origin=origin)
