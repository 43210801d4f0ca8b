"""Workspace file tools (read_file, write_file, list_files), confined to one directory.

Every path is resolved against the workspace and must stay inside it after `..` and symlinks are
followed; absolute paths are accepted only when they point inside the workspace.
"""

from __future__ import annotations

import os
from pathlib import Path

from .base import Tool, ToolError, tool_from_function

MAX_READ_BYTES = 10 << 20  # larger files: use execute_python to inspect them
MAX_WRITE_CHARS = 2_000_000
MAX_LIST_ENTRIES = 500


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """The real path `path` names inside `workspace`; ToolError when it would leave it."""
    root = Path(workspace).resolve()
    if "\x00" in path:
        raise ToolError("path contains a NUL byte")
    s = path.strip() or "."
    if s == "~" or s.startswith("~/"):  # HOME is the workspace inside the sandbox
        s = "." + s[1:]
    raw = Path(s)
    target = (raw if raw.is_absolute() else root / raw).resolve()  # follows `..` and existing symlinks
    if target != root and root not in target.parents:
        raise ToolError(f"{path!r} resolves to a location outside the workspace (absolute path, '..' or a "
                        "symlink); use paths relative to the workspace root")
    return target


def _walk(top: Path, recursive: bool) -> list[Path]:
    """Entries below `top`, symlinks not followed, at most MAX_LIST_ENTRIES + 1 of them."""
    if not recursive:
        return sorted(top.iterdir())[: MAX_LIST_ENTRIES + 1]
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            out.append(Path(dirpath) / name)
        if len(out) > MAX_LIST_ENTRIES:
            break
    return sorted(out)


def _rel(root: Path, p: Path) -> str:
    r = os.path.relpath(p, root.resolve())
    return "." if r == "." else r


def make_file_tools(workspace: Path, *, max_read_chars: int = 20000) -> list[Tool]:
    """read_file, write_file and list_files bound to `workspace`."""
    root = Path(workspace).resolve()

    def read_file(path: str, start_line: int = 1, end_line: int | None = None, max_chars: int = max_read_chars) -> str:
        """Read a UTF-8 text file of the workspace. Optionally only lines start_line..end_line (1-based,
        inclusive). Output longer than max_chars is cut and says so."""
        p = resolve_in_workspace(root, path)
        if not p.exists():
            raise ToolError(f"no such file: {path!r}")
        if p.is_dir():
            raise ToolError(f"{path!r} is a directory; use list_files")
        if not p.is_file():  # a FIFO planted by code in the sandbox would block the reader forever
            raise ToolError(f"{path!r} is not a regular file")
        size = p.stat().st_size
        if size > MAX_READ_BYTES:
            raise ToolError(f"{path!r} has {size} bytes (limit {MAX_READ_BYTES}); read parts of it with execute_python")
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise ToolError("start_line must be >= 1 and end_line >= start_line")
        data = p.read_bytes()
        if b"\x00" in data[:8192]:
            raise ToolError(f"{path!r} looks like a binary file ({size} bytes); inspect it with execute_python")
        text = data.decode("utf-8", "replace")
        if start_line > 1 or end_line is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[start_line - 1:end_line])
        max_chars = max(1, min(max_chars, max_read_chars * 5))
        if len(text) > max_chars:
            return text[:max_chars] + f"\n[... truncated: showing {max_chars} of {len(text)} characters ...]"
        return text

    def write_file(path: str, content: str) -> str:
        """Create or overwrite a text file of the workspace (parent directories are created)."""
        if len(content) > MAX_WRITE_CHARS:
            raise ToolError(f"content has {len(content)} characters (limit {MAX_WRITE_CHARS})")
        p = resolve_in_workspace(root, path)
        if p == root or p.is_dir():
            raise ToolError(f"{path!r} is a directory")
        if p.exists() and not p.is_file():
            raise ToolError(f"{path!r} exists and is not a regular file")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode('utf-8'))} bytes to {_rel(root, p)}"

    def list_files(path: str = ".", recursive: bool = False) -> str:
        """List a workspace directory (one entry per line, directories end with '/', files show their
        size). recursive=True lists the whole tree below it."""
        p = resolve_in_workspace(root, path)
        if not p.exists():
            raise ToolError(f"no such directory: {path!r}")
        if not p.is_dir():
            raise ToolError(f"{path!r} is a file; use read_file")
        entries = _walk(p, recursive)
        lines = []
        for e in entries[:MAX_LIST_ENTRIES]:
            rel = _rel(root, e)
            if e.is_symlink():
                lines.append(f"{rel} -> {os.readlink(e)}")
            elif e.is_dir():
                lines.append(rel + "/")
            else:
                lines.append(f"{rel} ({e.stat().st_size} bytes)")
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[... more than {MAX_LIST_ENTRIES} entries; only the first {MAX_LIST_ENTRIES} are shown ...]")
        return "\n".join(lines) if lines else "(empty directory)"

    return [tool_from_function(read_file), tool_from_function(write_file, writes=True),
            tool_from_function(list_files)]
