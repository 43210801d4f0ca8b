"""Attachment and page readers: bytes of a known kind → text an agent can read.

PDF (pypdf), spreadsheets (openpyxl for .xlsx; csv/tsv), Word (python-docx), HTML (trafilatura,
BeautifulSoup as a fallback), plain text. Images and audio need a multimodal model, which the text
tools do not have: they are reported as unsupported rather than guessed at.
"""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

from ...tools.base import ToolError

TEXT_SUFFIXES = {".txt", ".md", ".json", ".jsonl", ".jsonld", ".py", ".xml", ".yaml", ".yml", ".log", ".tex", ".js",
                 ".css", ".ini", ".cfg", ".toml", ".sql", ".sh", ".c", ".cpp", ".java", ".rs", ".go", ".pdb"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".svg"}
AUDIO_SUFFIXES = {".mp3", ".wav", ".m4a", ".flac", ".ogg", ".aac", ".mp4", ".mov"}


def pdf_text(data: bytes) -> str:
    from pypdf import PdfReader  # noqa: PLC0415

    reader = PdfReader(io.BytesIO(data))
    pages = [f"[page {i + 1}]\n{(page.extract_text() or '').strip()}" for i, page in enumerate(reader.pages)]
    return "\n\n".join(pages)


def xlsx_text(data: bytes) -> str:
    from openpyxl import load_workbook  # noqa: PLC0415

    wb = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    parts = []
    for ws in wb.worksheets:
        rows = [",".join("" if v is None else str(v) for v in row) for row in ws.iter_rows(values_only=True)]
        parts.append(f"[sheet {ws.title}]\n" + "\n".join(rows))
    return "\n\n".join(parts)


def csv_text(data: bytes, delimiter: str = ",") -> str:
    rows = csv.reader(io.StringIO(data.decode("utf-8", errors="replace")), delimiter=delimiter)
    return "\n".join(",".join(r) for r in rows)


def docx_text(data: bytes) -> str:
    from docx import Document  # noqa: PLC0415

    doc = Document(io.BytesIO(data))
    parts = [p.text for p in doc.paragraphs if p.text.strip()]
    for t, table in enumerate(doc.tables):
        parts.append(f"[table {t + 1}]")
        parts += [",".join(cell.text.strip() for cell in row.cells) for row in table.rows]
    return "\n".join(parts)


def html_text(html: str, url: str | None = None) -> str:
    try:
        import trafilatura  # noqa: PLC0415

        text = trafilatura.extract(html, url=url, include_tables=True, include_links=False, favor_recall=True)
        if text and text.strip():
            return text.strip()
    except ImportError:
        pass
    from bs4 import BeautifulSoup  # noqa: PLC0415

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript"]):
        tag.decompose()
    return "\n".join(line.strip() for line in soup.get_text("\n").splitlines() if line.strip())


def unsupported(kind: str, name: str) -> str:
    return (f"[unsupported: {name} is {kind}; reading it needs a multimodal model, which this tool does not have. "
            "Use other sources, or report that this attachment cannot be read.]")


def read_bytes(data: bytes, name: str) -> str:
    """Text of a file named `name` (the suffix decides the reader)."""
    suffix = Path(name).suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        return unsupported("an image", name)
    if suffix in AUDIO_SUFFIXES:
        return unsupported("audio/video", name)
    try:
        if suffix == ".pdf":
            return pdf_text(data)
        if suffix in (".xlsx", ".xlsm"):
            return xlsx_text(data)
        if suffix == ".csv":
            return csv_text(data)
        if suffix == ".tsv":
            return csv_text(data, "\t")
        if suffix == ".docx":
            return docx_text(data)
        if suffix in (".html", ".htm"):
            return html_text(data.decode("utf-8", errors="replace"))
        if suffix == ".zip":
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                return "[zip archive; members]\n" + "\n".join(z.namelist())
    except Exception as e:  # a corrupt file is an observation, not a crash
        raise ToolError(f"cannot read {name} as {suffix[1:]}: {type(e).__name__}: {e}") from None
    if suffix in TEXT_SUFFIXES or not suffix:
        return data.decode("utf-8", errors="replace")
    if b"\x00" in data[:4096]:
        return f"[unsupported: {name} is a binary {suffix or 'file'} with no text reader; inspect it with execute_python]"
    return data.decode("utf-8", errors="replace")
