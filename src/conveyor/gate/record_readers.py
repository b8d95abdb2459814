"""Readers of inputs whose rows come as records: JSON lines, Parquet, and a SQL query's result.

Values are kept as stored (a JSON number stays a number); a query's result is spooled to a local
Parquet file as text first, so it is hashed, counted and chunked like a file, and read once.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conveyor.gate.errors import BatchRejected
from conveyor.gate.readers import DEFAULT_CHUNK_SIZE, Chunk, SourceReader

if TYPE_CHECKING:
    import pandas as pd


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
                        f"line {line_number} of {self.path.name} is not valid JSON ({exc.msg} at column {exc.colno})",
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
