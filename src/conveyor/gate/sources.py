"""Which reader reads a gate's input: a SQL query, or a file by its extension (or ``file_format``)."""

from __future__ import annotations

from conveyor.gate.csv_reader import CsvReader
from conveyor.gate.errors import BatchRejected
from conveyor.gate.readers import DEFAULT_CHUNK_SIZE, SourceReader
from conveyor.gate.record_readers import JsonLinesReader, ParquetReader, SqlReader


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
