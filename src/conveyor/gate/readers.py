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

This module is the contract and what every reader shares (the file checks, the hashing pass);
the readers are :mod:`conveyor.gate.csv_reader` and :mod:`conveyor.gate.record_readers`, and
:func:`conveyor.gate.sources.reader_for` picks one.
"""

from __future__ import annotations

import codecs
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conveyor.gate.damage import TailScan, binary_format, not_text_reason
from conveyor.gate.errors import BatchRejected

if TYPE_CHECKING:
    import pandas as pd

#: Rows per chunk: large enough that Great Expectations' fixed cost per validation (it builds a
#: metric graph and fingerprints the frame on every run) stays small next to the work, small
#: enough that a chunk of a wide extract stays in the low hundreds of MB.
DEFAULT_CHUNK_SIZE = 250_000
#: bytes read at a time by the passes over a file
READ_BLOCK = 1 << 20
_BOM = codecs.BOM_UTF8
#: Delimiters a mis-configured export tends to use instead of a comma.
ALTERNATIVE_DELIMITERS = (";", "\t", "|")


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
            while block := fh.read(READ_BLOCK):
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


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _finish_hash(digest: Any, fh: Any) -> str:
    while block := fh.read(READ_BLOCK):
        digest.update(block)
    return str(digest.hexdigest())
