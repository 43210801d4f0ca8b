"""Race-free file access below a workspace directory, for host-side tools acting on paths a model chose.

Checking a path and then opening it again by name loses to code that swaps a directory for a symlink
between the two (the code runs concurrently in parallel modes). Here every step is relative to a
directory file descriptor already held: each component is opened with ``O_NOFOLLOW`` (directories
with ``O_DIRECTORY`` too), so the kernel never follows a symlink for us. A symlink met on the way is
read (``readlinkat``) and resolved by this walk itself, lexically and only inside the workspace, like
``openat2(RESOLVE_BENEATH)``; ``..`` pops the stack of directories actually traversed, so it can never
climb above the workspace fd. Whatever the racer does, what we open is a descendant of the workspace.
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .base import ToolError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_SYMLINKS = 40  # as the kernel's own limit (ELOOP)


def _outside(path: str) -> ToolError:
    return ToolError(f"{path!r} resolves to a location outside the workspace (absolute path, '..' or a "
                     "symlink); use paths relative to the workspace root")


def split_path(root: Path, path: str) -> list[str]:
    """The components of `path` relative to `root` (lexically; `..` kept for the walk to resolve)."""
    if "\x00" in path:
        raise ToolError("path contains a NUL byte")
    s = path.strip() or "."
    if s == "~" or s.startswith("~/"):  # HOME is the workspace inside the sandbox
        s = "." + s[1:]
    if s.startswith("/"):
        r = str(root)
        norm = os.path.normpath(s)
        if norm != r and not norm.startswith(r.rstrip("/") + "/"):
            raise _outside(path)
        s = norm[len(r):].lstrip("/") or "."
    return [p for p in s.split("/") if p not in ("", ".")]


class Beneath:
    """Opens paths below `root` without ever leaving it; holds one fd on the root while in use."""

    def __init__(self, root: Path | str, owner: tuple[int, int] | None = None):
        self.root = Path(root).resolve()
        self.owner = owner  # (uid, gid) given to directories and files this walk creates

    @contextmanager
    def _root_fd(self) -> Iterator[int]:
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            yield fd
        finally:
            os.close(fd)

    def _give(self, fd: int) -> None:
        if self.owner is not None:
            os.fchown(fd, *self.owner)

    def _resolve(self, root_fd: int, path: str, *, create_dirs: bool, final_dir: bool
                 ) -> tuple[list[int], str | None]:
        """Walk `path`; return the stack of open directory fds (stack[-1] the parent of the last
        component) and the last component (None when the path names a directory, which is stack[-1]).
        With final_dir the last component is walked into as well. Symlinks inside are followed here."""
        todo = split_path(self.root, path)
        stack = [os.dup(root_fd)]
        links = 0
        try:
            while todo:
                name = todo.pop(0)
                if name == "..":
                    if len(stack) == 1:
                        raise _outside(path)
                    os.close(stack.pop())
                    continue
                if not todo and not final_dir:
                    try:  # the last component: a symlink here is resolved too, the rest is the caller's
                        target = os.readlink(name, dir_fd=stack[-1])
                    except OSError:
                        return stack, name
                else:
                    try:
                        fd = os.open(name, _DIR_FLAGS, dir_fd=stack[-1])
                        stack.append(fd)
                        continue
                    except FileNotFoundError:
                        if not create_dirs:
                            raise ToolError(f"no such directory: {path!r}") from None
                        os.mkdir(name, 0o755, dir_fd=stack[-1])
                        fd = os.open(name, _DIR_FLAGS, dir_fd=stack[-1])
                        self._give(fd)
                        stack.append(fd)
                        continue
                    except OSError as e:
                        if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                            raise
                        try:
                            target = os.readlink(name, dir_fd=stack[-1])
                        except OSError:
                            raise ToolError(f"{path!r} is not a directory (use read_file for a file)" if not todo
                                            else f"{path!r}: {name!r} is not a directory") from None
                links += 1
                if links > MAX_SYMLINKS:
                    raise ToolError(f"{path!r}: too many levels of symbolic links")
                if target.startswith("/"):  # absolute: only as a path inside the workspace, from its root
                    if not _under(self.root, target):
                        raise _outside(path)
                    for fd in stack[1:]:
                        os.close(fd)
                    del stack[1:]
                    todo = split_path(self.root, target) + todo
                else:
                    todo = [p for p in target.split("/") if p not in ("", ".")] + todo
            return stack, None
        except BaseException:
            for fd in stack:
                os.close(fd)
            raise

    # ----------------------------------------------------------------- operations
    def read_bytes(self, path: str, max_bytes: int) -> bytes:
        with self._root_fd() as rfd:
            stack, name = self._resolve(rfd, path, create_dirs=False, final_dir=False)
            try:
                if name is None:
                    raise ToolError(f"{path!r} is a directory; use list_files")
                try:  # O_NONBLOCK: a FIFO planted by the code would block a plain open forever
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=stack[-1])
                except FileNotFoundError:
                    raise ToolError(f"no such file: {path!r}") from None
                except OSError as e:
                    if e.errno == errno.ELOOP:  # swapped for a symlink since the readlink: try again
                        raise ToolError(f"{path!r} changed while it was opened; try again") from None
                    raise
            finally:
                for d in stack:
                    os.close(d)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise ToolError(f"{path!r} is a directory; use list_files")
            if not stat.S_ISREG(st.st_mode):
                raise ToolError(f"{path!r} is not a regular file")
            if st.st_size > max_bytes:
                raise ToolError(f"{path!r} has {st.st_size} bytes (limit {max_bytes}); read parts of it with "
                                "execute_python")
            chunks, total = [], 0
            while total <= max_bytes:
                b = os.read(fd, 1 << 20)
                if not b:
                    break
                chunks.append(b)
                total += len(b)
            return b"".join(chunks)[:max_bytes]
        finally:
            os.close(fd)

    def write_bytes(self, path: str, data: bytes) -> str:
        """Create or overwrite a regular file (parents created); returns its workspace-relative path."""
        with self._root_fd() as rfd:
            stack, name = self._resolve(rfd, path, create_dirs=True, final_dir=False)
            try:
                if name is None:
                    raise ToolError(f"{path!r} is a directory")
                flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                try:
                    existed = True
                    fd = os.open(name, flags & ~os.O_CREAT, dir_fd=stack[-1])
                except FileNotFoundError:
                    existed = False
                    fd = os.open(name, flags | os.O_EXCL, 0o644, dir_fd=stack[-1])
                except OSError as e:
                    if e.errno == errno.EISDIR:
                        raise ToolError(f"{path!r} is a directory") from None
                    if e.errno == errno.ELOOP:
                        raise ToolError(f"{path!r} changed while it was opened; try again") from None
                    if e.errno == errno.ENXIO:  # a FIFO without reader
                        raise ToolError(f"{path!r} exists and is not a regular file") from None
                    raise
                rel = "/".join([p for p in [self._rel_of(stack[-1]), name] if p != "."])
            finally:
                for d in stack:
                    os.close(d)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ToolError(f"{path!r} exists and is not a regular file")
            if existed and st.st_nlink > 1:  # writing would change the same file under another name
                raise ToolError(f"{path!r} has {st.st_nlink} hard links; it is not overwritten")
            if not existed:
                self._give(fd)
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            return rel
        finally:
            os.close(fd)

    def _rel_of(self, fd: int) -> str:
        """Where an open directory is, relative to the root (for messages and listings only)."""
        try:
            return os.path.relpath(os.readlink(f"/proc/self/fd/{fd}"), self.root)
        except OSError:
            return "."

    def list_dir(self, path: str, recursive: bool, max_entries: int) -> list[tuple[str, str, int, str]]:
        """(relative path, kind 'dir'|'file'|'link'|'other', size, link target) below `path`, sorted,
        at most max_entries + 1 of them. Symlinks are listed, never followed."""
        with self._root_fd() as rfd:
            stack, name = self._resolve(rfd, path, create_dirs=False, final_dir=True)
            for d in stack[:-1]:
                os.close(d)
            top = stack[-1]
        try:
            prefix = self._rel_of(top)
            out: list[tuple[str, str, int, str]] = []
            walker = os.fwalk(".", dir_fd=top, follow_symlinks=False) if recursive else [(".", None, None, top)]
            for dirpath, _dirs, _files, dfd in walker:
                with os.scandir(dfd) as it:
                    names = sorted(e.name for e in it)
                for n in names:
                    rel = os.path.normpath(os.path.join(prefix, dirpath, n))
                    try:
                        st = os.stat(n, dir_fd=dfd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if stat.S_ISLNK(st.st_mode):
                        out.append((rel, "link", 0, os.readlink(n, dir_fd=dfd)))
                    elif stat.S_ISDIR(st.st_mode):
                        out.append((rel, "dir", 0, ""))
                    else:
                        out.append((rel, "file" if stat.S_ISREG(st.st_mode) else "other", st.st_size, ""))
                if len(out) > max_entries:
                    break
            return sorted(out)[: max_entries + 1]
        finally:
            os.close(top)

    def unlink(self, path: str) -> bool:
        """Remove a regular file below the root (never a directory, never through a symlink); False when
        there is none."""
        with self._root_fd() as rfd:
            try:
                stack, name = self._resolve(rfd, path, create_dirs=False, final_dir=False)
            except ToolError:
                return False
            try:
                if name is None:
                    return False
                try:
                    st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
                except FileNotFoundError:
                    return False
                if not stat.S_ISREG(st.st_mode):
                    return False
                os.unlink(name, dir_fd=stack[-1])
                return True
            finally:
                for d in stack:
                    os.close(d)


def _under(root: Path, target: str) -> bool:
    norm = os.path.normpath(target)
    r = str(root)
    return norm == r or norm.startswith(r.rstrip("/") + "/")

