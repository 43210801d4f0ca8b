"""Keeping API keys out of everything the project writes or prints.

A :class:`Redactor` knows the secret values of a run (API keys from the environment and config) and
replaces them wherever they appear. The event log, the console, error messages of the model layer and
the sandbox's scrubbed environment all use it.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Mapping

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
MASK = "[REDACTED]"
_MIN_SECRET_LEN = 6  # shorter values would mask ordinary words


def secret_env_names(environ: Mapping[str, str] | None = None) -> list[str]:
    environ = os.environ if environ is None else environ
    return [k for k in environ if SECRET_NAME.search(k)]


class Redactor:
    def __init__(self, secrets: Iterable[str] = (), include_environ: bool = True):
        values = {s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}
        if include_environ:
            values |= {os.environ[k] for k in secret_env_names() if len(os.environ[k]) >= _MIN_SECRET_LEN}
        # longest first, so a key that contains another is masked whole
        self._values = sorted(values, key=len, reverse=True)
        # bearer tokens in echoed headers are masked even when the value is unknown to us
        self._patterns = [re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}"),
                          re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")]

    def add(self, value: str | None) -> None:
        if value and len(value) >= _MIN_SECRET_LEN and value not in self._values:
            self._values.append(value)
            self._values.sort(key=len, reverse=True)

    def redact_text(self, text: str) -> str:
        for v in self._values:
            if v in text:
                text = text.replace(v, MASK)
        for p in self._patterns:
            text = p.sub(lambda m: (m.group(1) if m.re.groups else "") + MASK, text)
        return text


def redactor_for(key_env_names: Iterable[str | None]) -> Redactor:
    """The Redactor of a run: secret-looking variables plus the ones the config names as holding keys
    (`model_options.<role>.api_key_env`), whatever they are called."""
    return Redactor(os.environ.get(n) or "" for n in key_env_names if n)


def scrubbed_environ(extra_keep: Iterable[str] = ()) -> dict[str, str]:
    """The current environment without secret-looking variables (for child processes)."""
    keep = set(extra_keep)
    return {k: v for k, v in os.environ.items() if k in keep or not SECRET_NAME.search(k)}
