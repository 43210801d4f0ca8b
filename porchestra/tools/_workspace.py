"""Workspace bookkeeping done on the host: a bounded size scan, and the private copy of a user's
directory that a run works in.

`scan` walks a tree without following symlinks and stops at a deadline or an entry cap, so no
host-side step after a sandbox call (hand-over, size check) can take unbounded time however many files
the code made.

`SharedWorkspace` is how a user's own directory (``--workspace DIR``) is shared with model-written
code without re-owning or widening anything in it: the run works in a private copy that holds only
what any other user could read anyway (world-readable files, world-traversable directories, symlinks
as links); private files (e.g. mode 0600), other users' unreadable files, sockets, FIFOs and devices
stay behind, unseen. At the end the code's changes go back: changed files are rewritten in place
(their owner and mode stay), new files and directories are created owned by the directory's owner,
shared files the code deleted are deleted. Entries that were not shared are never touched, even when
the code made a file of the same name. All of it through race-free directory-fd walks (safe_fs).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .safe_fs import Beneath

_OPEN_RD = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass
class ScanResult:
    bytes: int = 0
    entries: int = 0
    complete: bool = True
    why_incomplete: str = ""


def scan(root: Path | str, *, max_entries: int, deadline_s: float) -> ScanResult:
    """Disk use (allocated blocks) and entry count below `root`, bounded by entries and time."""
    res = ScanResult()
    end = time.monotonic() + deadline_s
    stack = [str(root)]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                res.entries += 1
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                res.bytes += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)
                if res.entries > max_entries:
                    return ScanResult(res.bytes, res.entries, False, f"more than {max_entries} entries")
                if res.entries % 512 == 0 and time.monotonic() > end:
                    return ScanResult(res.bytes, res.entries, False, f"the scan took over {deadline_s:g} s")
    return res


def _digest(fd: int) -> str:
    h = hashlib.sha256()
    while chunk := os.read(fd, 1 << 20):
        h.update(chunk)
    return h.hexdigest()


@dataclass
class SyncReport:
    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # not synced back: links, special files, unshared names


class SharedWorkspace:
    def __init__(self, source: Path | str):
        self.source = Path(source).resolve()
        st = self.source.stat()
        self.owner = (st.st_uid, st.st_gid)
        self.copy = Path(tempfile.mkdtemp(prefix="porchestra-shared-"))
        os.chmod(self.copy, 0o755)
        self.shared: dict[str, str] = {}      # regular files: relative path → sha256 at copy time
        self.shared_dirs: set[str] = set()
        self.not_shared: set[str] = set()     # names present in the source that the code never saw
        self._copy_in()

    @staticmethod
    def _shareable(st: os.stat_result) -> bool:
        if stat.S_ISDIR(st.st_mode):
            return st.st_mode & 0o005 == 0o005  # others may list and enter it
        if stat.S_ISREG(st.st_mode):
            return bool(st.st_mode & 0o004) and st.st_nlink == 1  # world-readable, not linked in from elsewhere
        return stat.S_ISLNK(st.st_mode)

    def _copy_in(self) -> None:
        for dirpath, dirnames, filenames, dfd in os.fwalk(self.source, follow_symlinks=False):
            rel_dir = os.path.relpath(dirpath, self.source)
            keep_dirs = []
            for name in sorted(dirnames) + sorted(filenames):
                rel = os.path.normpath(os.path.join(rel_dir, name))
                try:
                    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if not self._shareable(st):
                    self.not_shared.add(rel)
                    continue
                dst = self.copy / rel
                if stat.S_ISDIR(st.st_mode):
                    dst.mkdir()
                    os.chmod(dst, stat.S_IMODE(st.st_mode) & 0o777)
                    self.shared_dirs.add(rel)
                    keep_dirs.append(name)
                elif stat.S_ISLNK(st.st_mode):
                    os.symlink(os.readlink(name, dir_fd=dfd), dst)
                else:
                    fd = os.open(name, _OPEN_RD, dir_fd=dfd)
                    try:
                        with open(dst, "wb") as out:
                            h = hashlib.sha256()
                            while chunk := os.read(fd, 1 << 20):
                                out.write(chunk)
                                h.update(chunk)
                        os.chmod(dst, stat.S_IMODE(st.st_mode) & 0o777)
                        self.shared[rel] = h.hexdigest()
                    finally:
                        os.close(fd)
            dirnames[:] = keep_dirs  # an unshared directory is not entered

    def sync_back(self) -> SyncReport:
        """Carry the code's changes from the copy to the user's directory (see the module docstring)."""
        rep = SyncReport()
        dest = Beneath(self.source, owner=self.owner)
        seen: set[str] = set()
        for dirpath, dirnames, filenames, dfd in os.fwalk(self.copy, follow_symlinks=False):
            rel_dir = os.path.relpath(dirpath, self.copy)
            keep = []
            for name in sorted(dirnames) + sorted(filenames):
                rel = os.path.normpath(os.path.join(rel_dir, name))
                if rel in self.not_shared or any(rel.startswith(p + "/") for p in self.not_shared):
                    rep.skipped.append(rel)  # a private entry of the same name is never overwritten
                    continue
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    keep.append(name)
                    continue
                if not stat.S_ISREG(st.st_mode):
                    rep.skipped.append(rel)
                    continue
                seen.add(rel)
                fd = os.open(name, _OPEN_RD, dir_fd=dfd)
                try:
                    if self.shared.get(rel) == _digest(fd):
                        continue
                    os.lseek(fd, 0, os.SEEK_SET)
                    data = b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
                finally:
                    os.close(fd)
                try:
                    dest.write_bytes(rel, data)
                    rep.written.append(rel)
                except Exception:  # noqa: BLE001 — e.g. the name is a directory or a link in the source
                    rep.skipped.append(rel)
            dirnames[:] = keep
        for rel in sorted(set(self.shared) - seen):
            if dest.unlink(rel):
                rep.deleted.append(rel)
        return rep

    def close(self) -> None:
        shutil.rmtree(self.copy, ignore_errors=True)
