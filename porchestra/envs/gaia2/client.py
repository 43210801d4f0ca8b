"""Client side of the ARE adapter: starts server.py in ARE's venv and speaks JSON lines with it.

One child process per loaded scenario. The child gets a fixed minimal environment (no host secrets), its own
temporary directory (ARE leaks sandbox dirs on import and reads `.env` from its cwd) and
PYTHONHASHSEED=0 (ARE's runtime ids are reproducible only then). Its stderr (ARE's logs) goes to a
file in that directory; the tail is attached to errors.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

from ...secrets import minimal_environ
from .venv import ensure_are_python

SERVER = Path(__file__).with_name("server.py")
EngineFn = Callable[[list[dict[str, Any]]], str]


class AREError(RuntimeError):
    """The ARE adapter failed (process died, timed out, or answered an error)."""


class AREClient:
    def __init__(self, python: str | Path | None = None, timeout_s: float = 600.0,
                 engine: EngineFn | None = None):
        self.timeout_s = timeout_s
        self.engine = engine  # answers the LLM judge's engine requests
        self._local = threading.local()  # per thread: inside a request (judge calls happen there)
        self._tmp = Path(tempfile.mkdtemp(prefix="porchestra-are-"))
        self._stderr_path = self._tmp / "are-stderr.log"
        # a fixed minimal environment (no host variable beyond the locale; PYTHONPATH, which would
        # shadow ARE's packages with porchestra's, and any credential never reach it)
        env = minimal_environ(PYTHONHASHSEED="0", TMPDIR=str(self._tmp), HOME=str(self._tmp), PYTHONUNBUFFERED="1",
                              PYTHONIOENCODING="utf-8", TQDM_DISABLE="1", NO_COLOR="1", TERM="dumb")
        py = str(python or ensure_are_python())
        self._stderr = open(self._stderr_path, "wb")
        self._proc = subprocess.Popen([py, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, cwd=self._tmp, env=env)
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, name="are-client-reader", daemon=True).start()
        self._next_id = 0
        self._lock = threading.Lock()

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            self._lines.put(raw)
        self._lines.put(None)

    def stderr_tail(self, n: int = 3000) -> str:
        try:
            return self._stderr_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def request(self, op: str, timeout_s: float | None = None, **params: Any) -> dict[str, Any]:
        """Send one request and return its answer; raises AREError on failure."""
        with self._lock:
            self._next_id += 1
            rid = self._next_id
            self._write({"id": rid, "op": op, **params})
            self._local.active = True
            try:
                return self._await(rid, op, timeout_s or self.timeout_s)
            finally:
                self._local.active = False

    @property
    def in_request(self) -> bool:
        """True in the thread that waits for an answer (e.g. inside an LLM-judge engine call)."""
        return getattr(self._local, "active", False)

    def _write(self, obj: dict[str, Any]) -> None:
        if self._proc.poll() is not None or self._proc.stdin is None:
            raise AREError(f"ARE adapter is not running (exit {self._proc.returncode}): {self.stderr_tail()}")
        try:
            self._proc.stdin.write((json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise AREError(f"ARE adapter pipe closed: {e}; {self.stderr_tail()}") from None

    def _await(self, rid: int, op: str, timeout_s: float) -> dict[str, Any]:
        while True:
            try:
                raw = self._lines.get(timeout=timeout_s)
            except queue.Empty:
                raise AREError(f"ARE adapter did not answer {op!r} within {timeout_s:.0f}s") from None
            if raw is None:
                raise AREError(f"ARE adapter exited during {op!r}: {self.stderr_tail()}")
            try:
                msg = json.loads(raw)
            except json.JSONDecodeError:
                continue  # never expected: the server keeps stdout clean
            if "engine_request" in msg:
                self._answer_engine(msg["engine_request"])
                continue
            if msg.get("id") != rid:
                continue
            if not msg.get("ok", False):
                raise AREError(f"ARE {op} failed: {msg.get('error')}")
            return msg

    def _answer_engine(self, req: dict[str, Any]) -> None:
        text, error = None, None
        if self.engine is None:
            error = "no judge engine configured (use the scripted judge or give --judge-model)"
        else:
            try:
                text = self.engine(req.get("messages") or [])
            except Exception as e:  # the judge reports the failure as a failed check
                error = f"{type(e).__name__}: {e}"
        self._write({"engine_response": {"id": req.get("id"), "text": text, "error": error}})

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                if self._lock.acquire(timeout=1):  # not while another thread awaits an answer
                    try:
                        self._write({"id": 0, "op": "stop"})
                    finally:
                        self._lock.release()
                self._proc.stdin.close()  # type: ignore[union-attr]
                self._proc.wait(timeout=10)
            except (AREError, OSError, subprocess.TimeoutExpired):
                pass
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait(timeout=10)
        self._stderr.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "AREClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def list_tutorials(python: str | Path | None = None) -> list[dict[str, Any]]:
    """ARE's bundled offline tutorial scenarios with their first user message."""
    with AREClient(python) as c:
        return c.request("tutorials")["tutorials"]


__all__ = ["AREClient", "AREError", "list_tutorials"]
