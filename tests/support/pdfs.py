"""Small real PDF files for the tests, written byte by byte (no PDF library writes them).

:func:`text_pdf` gives a one-page PDF whose text layer holds the given lines (Helvetica, one
``Tj`` per line), as an accounting system exports an invoice; :func:`scanned_pdf` a page with
only a drawing on it, as a scanner's PDF looks to a text extractor.
"""

from __future__ import annotations


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _pdf(content: bytes, *, with_font: bool) -> bytes:
    resources = b"<< /Font << /F1 5 0 R >> >>" if with_font else b"<< >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources " + resources + b" /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
    ]
    if with_font:
        objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def text_pdf(lines: list[str]) -> bytes:
    """A one-page PDF whose text layer is ``lines`` (Latin-1 characters), top to bottom."""
    ops = ["BT", "/F1 11 Tf", "14 TL", "50 800 Td"]
    for line in lines:
        ops.append(f"({_escape(line)}) Tj T*")
    ops.append("ET")
    return _pdf("\n".join(ops).encode("cp1252"), with_font=True)


def scanned_pdf() -> bytes:
    """A one-page PDF with no text layer (a grey rectangle where a scan's image would be)."""
    return _pdf(b"0.6 g 40 60 515 720 re f", with_font=False)
