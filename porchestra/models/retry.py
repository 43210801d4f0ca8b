"""The retry policy of the remote backends: exponential backoff with full jitter, Retry-After honoured.

Retried: HTTP 408/409/429 and 5xx, timeouts, connection errors (including a connection cut mid-
response) and unusable 200 replies (empty or non-JSON body, no choices). Not retried: other 4xx (bad
request, auth, permission, not found) — those raise :class:`ModelError` at once. Every retry is recorded
as `{attempt, error, status, wait_s}`; the list is on `Completion.retries`, or on `ModelError.retries`
when the call fails, so the Gateway logs it either way. All text is passed through a Redactor first.

Three limits bound one attempt, and the error says which one was hit: the connect timeout, the read
timeout (longest wait for the next bytes) and a wall-clock deadline (:func:`run_with_deadline`), so a
server that trickles bytes cannot hold a call open past `deadline_s`.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Mapping, TypeVar

from ..secrets import Redactor
from .base import ModelError

T = TypeVar("T")

RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx except 501/505 (never transient)
_MAX_ERROR_CHARS = 300


class BadResponse(Exception):
    """A 200 reply the backend cannot use (empty, not JSON, no choices). Retried."""

    def __init__(self, message: str, status: int | None = 200):
        super().__init__(message)
        self.status = status


class DeadlineExceeded(Exception):
    """One attempt ran past its wall-clock deadline. Retried."""

    def __init__(self, deadline_s: float):
        super().__init__(f"total deadline: the attempt ran past deadline_s={deadline_s:g} s")


def run_with_deadline(fn: Callable[[], T], deadline_s: float | None,
                      abort: Callable[[], None] | None = None) -> T:
    """`fn()` in a helper thread, given up at `deadline_s` (DeadlineExceeded). `abort` is then called
    to cut the connection, so the abandoned thread ends promptly instead of at its read timeout."""
    if deadline_s is None:
        return fn()
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 — re-raised in the caller's thread
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=target, name="porchestra-model-call", daemon=True).start()
    if not done.wait(deadline_s):
        if abort is not None:
            try:
                abort()
            except Exception:  # noqa: BLE001 — best effort; the thread also ends at its read timeout
                pass
        raise DeadlineExceeded(deadline_s)
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass
class Failure:
    """One failed attempt, classified."""

    retryable: bool
    error: str                 # short description, redacted by the caller before it leaves
    status: int | None = None  # HTTP status when there was one
    retry_after_s: float | None = None


def parse_retry_after(headers: Mapping[str, str] | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` (delta-seconds or an HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def _retryable_status(status: int) -> bool:
    return status in RETRY_STATUS or (status >= 500 and status not in (501, 505))


def classify(exc: BaseException) -> Failure | None:
    """Classify an exception of the openai client (litellm's errors subclass these) or our own
    :class:`BadResponse`. Returns None for anything else: a bug, which must not be retried or hidden."""
    import openai  # a core dependency; imported here to keep `import porchestra.models` light

    if isinstance(exc, BadResponse):
        return Failure(True, f"bad response: {exc}", exc.status)
    if isinstance(exc, DeadlineExceeded):
        return Failure(True, f"timeout: {exc}")
    if isinstance(exc, openai.APITimeoutError):
        return Failure(True, f"timeout: {_which_timeout(exc.__cause__ or exc.__context__)}")
    kinds = _httpx_kinds(exc)  # raised unwrapped while reading a streamed body
    if "TimeoutException" in kinds:
        return Failure(True, f"timeout: {_which_timeout(exc)}")
    if kinds & {"TransportError", "StreamError"}:  # e.g. the connection cut mid-body
        return Failure(True, f"connection error ({type(exc).__name__}: {exc})")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        return Failure(True, f"connection error{detail}")
    if isinstance(exc, openai.APIStatusError):
        status = int(exc.status_code)
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        reason = getattr(response, "reason_phrase", "") or ""
        return Failure(_retryable_status(status), f"HTTP {status} {reason}: {exc.message}".strip(),
                       status, parse_retry_after(headers))
    if isinstance(exc, openai.APIError):  # e.g. a response the client could not validate
        return Failure(True, f"{type(exc).__name__}: {exc}")
    return None


@dataclass
class RetryPolicy:
    """`max_retries` retries after the first attempt. Waits: full jitter, uniform(0, min(max,
    base * 2**k)) for the k-th retry; a server's Retry-After wins, capped at `backoff_max_s`."""

    max_retries: int = 6
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    @classmethod
    def from_options(cls, options: Any, sleep: Callable[[float], None] | None = None,
                     seed: int | None = None) -> "RetryPolicy":
        return cls(max_retries=max(0, int(options.max_retries)),
                   backoff_base_s=float(options.backoff_base_s),
                   backoff_max_s=float(options.backoff_max_s),
                   sleep=time.sleep if sleep is None else sleep, rng=random.Random(seed))

    def wait_s(self, retry_index: int, retry_after_s: float | None = None) -> float:
        if retry_after_s is not None:
            return min(retry_after_s, self.backoff_max_s)
        cap = min(self.backoff_max_s, self.backoff_base_s * (2 ** retry_index))
        return self.rng.uniform(0.0, cap)

    def run(self, fn: Callable[[], T], *, label: str, redactor: Redactor,
            classify: Callable[[BaseException], Failure | None] = classify) -> tuple[T, list[dict[str, Any]]]:
        """Call `fn` until it succeeds, a non-retryable error occurs, or retries run out.
        Returns (result, retries); raises ModelError (with `.retries`) otherwise."""
        retries: list[dict[str, Any]] = []
        attempt = 0
        while True:
            attempt += 1
            failure: Failure | None = None
            try:
                return fn(), retries
            except Exception as e:  # noqa: BLE001 — classified below; unknown errors re-raised
                failure = classify(e)
                if failure is None:
                    if hasattr(e, "retries"):  # e.g. a rejected structured-output mode: keep the record
                        e.retries = list(retries)
                    raise
            # outside the except block: the ModelError carries no chained exception, whose text
            # (an echoed Authorization header, say) could leak a key into a traceback
            error = _clip(redactor.redact_text(failure.error))
            if not failure.retryable:
                raise model_error(f"{label}: {error} (not retried)", retries, failure.status)
            if attempt > self.max_retries:
                raise model_error(
                    f"{label}: failed after {attempt} attempts; last error: {error}", retries, failure.status)
            wait = round(self.wait_s(attempt - 1, failure.retry_after_s), 3)
            retries.append({"attempt": attempt, "error": error, "status": failure.status, "wait_s": wait})
            self.sleep(wait)


def _httpx_kinds(exc: BaseException | None) -> set[str]:
    """Class names in the MRO of an httpx (or httpx2, which the openai client may use) exception."""
    if exc is None or not type(exc).__module__.startswith("httpx"):
        return set()
    return {c.__name__ for c in type(exc).__mro__}


def _which_timeout(exc: BaseException | None) -> str:
    kinds = _httpx_kinds(exc)
    if kinds & {"ConnectTimeout", "PoolTimeout"}:
        return "connect timeout: no connection within connect_timeout_s"
    if "ReadTimeout" in kinds:
        return "read timeout: no bytes from the server within timeout_s"
    if "WriteTimeout" in kinds:
        return "write timeout: the request could not be sent within timeout_s"
    return "the request timed out"


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "…"


def model_error(message: str, retries: list[dict[str, Any]], status: int | None = None) -> ModelError:
    err = ModelError(message)
    err.retries = list(retries)  # type: ignore[attr-defined]  # logged by the Gateway
    err.status = status  # type: ignore[attr-defined]  # the last attempt's HTTP status, if any
    return err


__all__ = ["BadResponse", "DeadlineExceeded", "Failure", "RetryPolicy", "classify", "model_error", "parse_retry_after",
           "run_with_deadline"]
