"""Materialise the project's GAIA-style fixtures into a snapshot directory (metadata.jsonl + files).

The attachments are kept in the repository as text sources (no binary blobs) and built here:
.xlsx with openpyxl, .docx with python-docx, .pdf with a minimal hand-written PDF (one page of
Helvetica text lines, readable by pypdf).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
PAGES = FIXTURES / "pages"


def _pdf_escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_text_pdf(lines: list[str], dest: Path) -> None:
    content = "BT /F1 11 Tf 14 TL 50 760 Td " + " ".join(f"({_pdf_escape(x)}) Tj T*" for x in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content.encode('latin-1'))} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    dest.write_bytes(bytes(out))


def _build(src: Path, dest_dir: Path) -> None:
    name = src.name
    if name.endswith(".xlsx.json"):
        from openpyxl import Workbook  # noqa: PLC0415

        spec = json.loads(src.read_text())
        wb = Workbook()
        ws = wb.active
        ws.title = spec.get("sheet", "Sheet1")
        for row in spec["rows"]:
            ws.append(row)
        wb.save(dest_dir / name.removesuffix(".json"))
    elif name.endswith(".docx.json"):
        from docx import Document  # noqa: PLC0415

        doc = Document()
        for para in json.loads(src.read_text())["paragraphs"]:
            doc.add_paragraph(para)
        doc.save(str(dest_dir / name.removesuffix(".json")))
    elif name.endswith(".pdf.txt"):
        write_text_pdf(src.read_text().splitlines(), dest_dir / name.removesuffix(".txt"))
    else:
        shutil.copyfile(src, dest_dir / name)


def build_snapshot(dest: str | Path) -> Path:
    """Write metadata.jsonl and every attachment into `dest`; returns `dest`."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / "metadata.jsonl", dest / "metadata.jsonl")
    for src in sorted((FIXTURES / "attachments").iterdir()):
        _build(src, dest)
    return dest
