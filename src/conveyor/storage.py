"""Every file Conveyor reads or writes, on Airflow's object storage, under one configured base.

Landing snapshots, reports, the archive and the inbox live under ``[conveyor] storage_base``
(with ``[conveyor] storage_conn_id``): ``s3://bucket/prefix`` with an AWS connection in
production, so no task assumes that another task of its run ran on the same machine; by default
``file://$CONVEYOR_HOME/files``, which is right for one machine only (the quickstart).

Paths travel between tasks and into the ledger as URLs (``str()`` of an
:class:`~airflow.sdk.ObjectStoragePath`, which carries the connection id: ``s3://conn@bucket/key``);
:func:`as_path` turns one back into a path. A plain local path is a ``file://`` URL.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from conveyor import config

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

_CHUNK = 1 << 20


def _home() -> Path:
    from conveyor.ledger.connection import conveyor_home

    return conveyor_home()


def as_path(url: str | os.PathLike[str] | ObjectStoragePath, conn_id: str | None = None) -> ObjectStoragePath:
    """An object-storage path from a URL (``s3://[conn@]bucket/key``, ``file:///...``) or a local path."""
    from airflow.sdk import ObjectStoragePath

    if isinstance(url, ObjectStoragePath):
        return url
    text = os.fspath(url)
    if "://" not in text:
        text = file_url(text)
    return ObjectStoragePath(text, conn_id=conn_id or None)


def file_url(path: str | os.PathLike[str]) -> str:
    """``file://`` + the absolute path, spelled as it is on disk.

    Not :meth:`Path.as_uri`: it percent-encodes spaces, ``#``, ``%``, ``(``, ``)`` and ``?``, and
    :class:`~airflow.sdk.ObjectStoragePath` takes a URL's path literally (it never decodes it), so
    ``inbox (march)`` would become a folder ``inbox%20%28march%29`` that does not exist.
    """
    return "file://" + str(Path(path).expanduser().resolve())


def storage_path(url: str | os.PathLike[str] | ObjectStoragePath) -> ObjectStoragePath:
    """The file a URL names, as an :class:`~airflow.sdk.ObjectStoragePath` (the public spelling of
    :func:`as_path`): ``storage_path(item.payload["path"]).read_bytes()``."""
    return as_path(url)


def root() -> ObjectStoragePath:
    """The configured base of every file (``[conveyor] storage_base``)."""
    base = config.get("storage_base") or file_url(_home() / "files")
    return as_path(base, conn_id=config.get("storage_conn_id") or None)


def under(*parts: str) -> ObjectStoragePath:
    """``<storage_base>/<parts...>``, each part made safe for a file name."""
    path = root()
    for part in parts:
        path = path / safe_name(part)
    return path


def safe_name(text: str) -> str:
    """A run id or business key as one path segment (no slashes, colons or spaces)."""
    return "".join(c if c.isalnum() or c in "-_.+" else "_" for c in str(text)) or "_"


def is_local(path: ObjectStoragePath) -> bool:
    return (path.protocol or "file") in ("file", "local")


def local_path(path: ObjectStoragePath) -> Path:
    """The local file of a ``file://`` path."""
    return Path(path.path)


def write_text(path: ObjectStoragePath, text: str) -> str:
    """Write ``text`` (UTF-8) as one whole object; returns its sha256.

    On a local disk through a temporary file and a rename, so a reader never sees half a file;
    an object store's PUT is atomic by itself.
    """
    data = text.encode("utf-8")
    if is_local(path):
        target = local_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    else:
        with path.open("wb") as out:
            out.write(data)
    return hashlib.sha256(data).hexdigest()


def read_bytes(path: ObjectStoragePath) -> bytes:
    with path.open("rb") as stream:
        data: bytes = stream.read()
    return data


def sha256_of(path: ObjectStoragePath) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def copy(source: ObjectStoragePath, target: ObjectStoragePath) -> None:
    """Copy one file (streamed), creating the target's folder on a local disk."""
    if is_local(target):
        local_path(target).parent.mkdir(parents=True, exist_ok=True)
    with source.open("rb") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst, _CHUNK)


def move(source: ObjectStoragePath, target: ObjectStoragePath) -> bool:
    """Move one file; idempotent: a source already gone whose target exists counts as moved.

    :return: True when this call moved it, False when an earlier attempt had.
    """
    if not source.exists():
        if target.exists():
            return False
        raise FileNotFoundError(f"{source} is gone and {target} does not exist")
    if is_local(source) and is_local(target):
        local_path(target).parent.mkdir(parents=True, exist_ok=True)
        os.replace(local_path(source), local_path(target))
        return True
    copy(source, target)
    source.unlink()
    return True


@contextmanager
def local_copy(path: ObjectStoragePath) -> Iterator[Path]:
    """A local file with the content of ``path`` for the ``with`` block (the file itself when local).

    Readers that need a seekable local file (the gate's chunked CSV and Parquet readers) read a
    remote object through this; the copy is removed afterwards.
    """
    if is_local(path):
        yield local_path(path)
        return
    with tempfile.TemporaryDirectory(prefix="conveyor-") as folder:
        copy_ = Path(folder) / (path.name or "input")  # the file's own name: messages name it
        with copy_.open("wb") as out, path.open("rb") as src:
            shutil.copyfileobj(src, out, _CHUNK)
        yield copy_
