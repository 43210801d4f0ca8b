"""Workspace file tools (read_file, write_file, list_files), confined to one directory.

Every path is resolved against the workspace and must stay inside it after `..` and symlinks are
followed; absolute paths are accepted only when they point inside the workspace. The tools resolve and
open in one race-free walk of directory file descriptors (safe_fs.Beneath): code running concurrently
in the sandbox cannot swap a component for a symlink between a check and the open.
"""

from __future__ import annotations

from pathlib import Path

from .base import Tool, ToolError, tool_from_function
from .safe_fs import Beneath

MAX_READ_BYTES = 10 << 20  # larger files: use execute_python to inspect them
MAX_WRITE_CHARS = 2_000_000
MAX_LIST_ENTRIES = 500


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """The real path `path` names inside `workspace`; ToolError when it would leave it. A check by name:
    only for the run's own setup before any model-written code ran (task files); tools use Beneath."""
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


def make_file_tools(workspace: Path, *, max_read_chars: int = 20000,
                    owner: tuple[int, int] | None = None) -> list[Tool]:
    """read_file, write_file and list_files bound to `workspace`. Every access goes through
    :class:`Beneath` (no check-then-open by name: a concurrent symlink swap cannot redirect it).
    `owner`: (uid, gid) given to what write_file creates (the sandbox's uid, so its code may change it)."""
    root = Path(workspace).resolve()
    fs = Beneath(root, owner=owner)

    def read_file(path: str, start_line: int = 1, end_line: int | None = None, max_chars: int = max_read_chars) -> str:
        """Read a UTF-8 text file of the workspace. Optionally only lines start_line..end_line (1-based,
        inclusive). Output longer than max_chars is cut and says so."""
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise ToolError("start_line must be >= 1 and end_line >= start_line")
        data = fs.read_bytes(path, MAX_READ_BYTES)
        if b"\x00" in data[:8192]:
            raise ToolError(f"{path!r} looks like a binary file ({len(data)} bytes); inspect it with execute_python")
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
        data = content.encode("utf-8", "replace")  # a lone surrogate (JSON-decoded reply) becomes '?'
        rel = fs.write_bytes(path, data)
        return f"wrote {len(data)} bytes to {rel}"

    def list_files(path: str = ".", recursive: bool = False) -> str:
        """List a workspace directory (one entry per line, directories end with '/', files show their
        size). recursive=True lists the whole tree below it."""
        entries = fs.list_dir(path, recursive, MAX_LIST_ENTRIES)
        lines = []
        for rel, kind, size, target in entries[:MAX_LIST_ENTRIES]:
            if kind == "link":
                lines.append(f"{rel} -> {target}")
            elif kind == "dir":
                lines.append(rel + "/")
            else:
                lines.append(f"{rel} ({size} bytes)")
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[... more than {MAX_LIST_ENTRIES} entries; only the first {MAX_LIST_ENTRIES} are shown ...]")
        return "\n".join(lines) if lines else "(empty directory)"

    return [tool_from_function(read_file), tool_from_function(write_file, writes=True),
            tool_from_function(list_files)]

