"""The text of an inbox document, whatever format it arrived in (text files and PDFs).

Most invoices arrive as PDF. A PDF with a text layer (exported by an accounting system) is read
with pypdf, page by page; a PDF without one (a scan: pictures of pages) has no text to give, and
saying so is the only honest answer: :class:`UnreadableDocument` names the reason, and the item
goes to a person instead of the model (an OCR step is a deployment's choice, not ours).
"""

from __future__ import annotations

import io
import logging

from conveyor.errors import IntakeError

#: Formats read as UTF-8 text as they are.
TEXT_FORMATS = frozenset({"txt", "csv", "json", "jsonl", "md", "xml", "html", "eml"})
#: Formats :func:`document_text` can read.
READABLE_FORMATS = TEXT_FORMATS | {"pdf"}


class UnreadableDocument(IntakeError, ValueError):
    """A document whose text cannot be had; the message says why, for the person who reads it."""


def document_text(data: bytes, fmt: str, *, name: str = "the document") -> str:
    """The text of a document's bytes.

    :param data: the document's content.
    :param fmt: its format (the file extension without the dot, any case).
    :param name: its name, for messages.
    :raises UnreadableDocument: an unknown format, text that is not UTF-8, a PDF that cannot be
        opened or has no text layer, or a document with no text at all.
    """
    fmt = fmt.lower().lstrip(".")
    if fmt == "pdf":
        text = _pdf_text(data, name)
    elif fmt in TEXT_FORMATS:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            bad = f"byte 0x{data[exc.start]:02x} at offset {exc.start}"
            raise UnreadableDocument(f"{name} is not UTF-8 text ({bad})") from None
    else:
        raise UnreadableDocument(
            f"{name} is a {fmt or 'extensionless'} file; readable formats: {', '.join(sorted(READABLE_FORMATS))}"
        )
    if not text.strip():
        raise UnreadableDocument(f"{name} is empty")
    return text


def _pdf_text(data: bytes, name: str) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    # pypdf logs every damaged-file repair it attempts: the reason we raise says it once.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    if not data.lstrip().startswith(b"%PDF"):
        raise UnreadableDocument(f"{name} is not a PDF (it does not start with %PDF)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocument(f"{name} is a password-protected PDF: a person must open it")
        pages = [page.extract_text() or "" for page in reader.pages]
    except UnreadableDocument:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise UnreadableDocument(f"{name} cannot be read as a PDF: {exc}") from None
    text = "\n".join(pages)
    if not text.strip():
        raise UnreadableDocument(
            f"{name} is a PDF without a text layer ({len(pages)} page{'s' if len(pages) != 1 else ''}; a "
            "scanned image?): no text to extract, a person must read it"
        )
    return text
