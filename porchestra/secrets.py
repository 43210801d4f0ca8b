"""Keeping API keys out of everything the project writes or prints.

A :class:`Redactor` knows the secret values of a run (API keys from the environment and config) and
replaces them wherever they appear. The event log, the console, error messages of the model layer and
the sandbox's scrubbed environment all use it.
"""

from __future__ import annotations

import base64
import os
import re
from typing import Iterable, Mapping
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

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
        # longest first, so a key that contains another is masked whole; each with its common encodings
        self._values = sorted({e for v in values for e in encodings(v)}, key=len, reverse=True)
        # bearer tokens in echoed headers are masked even when the value is unknown to us
        self._patterns = [re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}"),
                          re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")]

    def add(self, value: str | None) -> None:
        if value and len(value) >= _MIN_SECRET_LEN and value not in self._values:
            self._values.extend(e for e in encodings(value) if e not in self._values)
            self._values.sort(key=len, reverse=True)

    def redact_text(self, text: str) -> str:
        for v in self._values:
            if v in text:
                text = text.replace(v, MASK)
        for p in self._patterns:
            text = p.sub(lambda m: (m.group(1) if m.re.groups else "") + MASK, text)
        return _BASIC.sub(_mask_basic, text)


def encodings(value: str) -> set[str]:
    """`value` and the forms it commonly travels in: URL-encoded (quote / quote_plus), hex (both
    cases), and base64 (standard and URL-safe alphabets) at each of the three alignments a value can
    have inside a longer encoded blob (`Basic base64(user:key)`, a JSON document encoded whole): only the
    characters that depend on the value alone are kept, so a match anywhere in such a blob is masked."""
    raw = value.encode("utf-8", "surrogatepass")
    out = {value, quote(value, safe=""), quote_plus(value, safe=""), raw.hex(), raw.hex().upper()}
    n = len(raw)
    for k in range(3):  # k bytes of something else before the value in the encoded stream
        enc = base64.b64encode(bytes(k) + raw).decode()
        start = -(-8 * k // 6)  # first character made only of the value's bits
        end = (8 * (k + n)) // 6  # last character not mixed with what follows
        core = enc[start:end]
        if len(core) >= 8:
            out |= {core, core.replace("+", "-").replace("/", "_")}
    return {e for e in out if len(e) >= _MIN_SECRET_LEN}


def same_endpoint(a: str | None, b: str | None) -> bool:
    """Whether two base URLs name the same server (scheme, host, port); None is the public OpenAI API."""
    def norm(u: str | None) -> tuple[str, str, int | None]:
        if not u:
            return ("https", "api.openai.com", 443)
        p = urlsplit(u if "://" in u else "http://" + u)
        try:
            port = p.port or (443 if p.scheme == "https" else 80)
        except ValueError:
            port = None
        return (p.scheme.lower(), (p.hostname or "").lower(), port)
    return norm(a) == norm(b)


# "Basic <base64 of user:password>" (URL userinfo becomes this header); masked only when it decodes to
# credentials, so ordinary prose ("a basic implementation") is left alone
_BASIC = re.compile(r"(?i)\b(basic\s+)([A-Za-z0-9+/]{8,}={0,2})")


def _mask_basic(m: re.Match[str]) -> str:
    try:
        decoded = base64.b64decode(m.group(2), validate=True).decode("utf-8")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return m.group(0)
    return m.group(1) + MASK if ":" in decoded else m.group(0)


def url_secrets(url: str | None) -> list[str]:
    """Credentials written into a URL: the userinfo password and secret-looking query values."""
    if not url:
        return []
    parts = urlsplit(url)
    found = [parts.password or ""]
    found += [v for k, v in parse_qsl(parts.query) if SECRET_NAME.search(k)]
    return [f for f in found if f]


def redactor_for(model_options: Iterable[object]) -> Redactor:
    """The Redactor of a run: secret-looking variables, plus the variables the config names as holding
    keys (`model_options.<role>.api_key_env`, whatever they are called) and credentials inside the
    configured base URLs (`http://user:password@host/...`), which the config dump would otherwise carry."""
    values: list[str] = []
    for o in model_options:
        name = getattr(o, "api_key_env", None)
        values += [os.environ.get(name) or ""] if name else []
        values += url_secrets(getattr(o, "base_url", None))
    return Redactor(values)


def scrubbed_environ(extra_keep: Iterable[str] = ()) -> dict[str, str]:
    """The current environment without secret-looking variables. Name-based, so a credential in an
    innocently named variable passes: child processes use :func:`minimal_environ` instead; this
    stays only for callers outside porchestra."""
    keep = set(extra_keep)
    return {k: v for k, v in os.environ.items() if k in keep or not SECRET_NAME.search(k)}


# the only host variables a child process gets unasked (locale, terminal, time zone)
PASS_THROUGH = ("LANG", "LC_ALL", "LC_CTYPE", "LANGUAGE", "TERM", "TZ")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# what the host tools porchestra itself starts around a run (git, pip, venv builds, the docker client,
# the hub download) need of the host: their own configuration (pip's index and certificates, proxies,
# the docker daemon's address). Never given to model-written code, which runs in the sandbox.
HOST_TOOL_ENV = ("PIP_*", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                 "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
                 "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY")


def allow_list(value: Iterable[str] | str | None) -> tuple[str, ...]:
    """`env_allow` as given in a config (a list) or by `-O env_allow=A,B` (a comma-separated string)."""
    if not value:
        return ()
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return tuple(i.strip() for i in items if i.strip())


def minimal_environ(allow: Iterable[str] = (), **fixed: str) -> dict[str, str]:
    """The environment of every child process porchestra starts (the sandbox, SWE-bench's git, venv
    and test steps, ARE's process): a fixed minimal one (locale, a default PATH, C.UTF-8) plus only the
    host variables `allow` names (exact names or `NAME_*` prefixes, :func:`allowed_environ`), then
    `fixed` over both. Nothing is dropped by its name looking secret: nothing unlisted is passed at all."""
    env = {k: os.environ[k] for k in PASS_THROUGH if k in os.environ}
    env.update(allowed_environ(tuple(allow)))
    env.update(fixed)
    env.setdefault("PATH", DEFAULT_PATH)
    env.setdefault("LANG", "C.UTF-8")
    return env


def host_tool_environ(allow: Iterable[str] = (), **fixed: str) -> dict[str, str]:
    """:func:`minimal_environ` for a trusted host tool: also its own configuration (HOST_TOOL_ENV) and
    the host's PATH and HOME (paths, so git, pip and compilers are found and their caches reused)."""
    host = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    return minimal_environ((*HOST_TOOL_ENV, *allow), **{**host, **fixed})


def allowed_environ(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of `environ` (default: this process's) that `names` allows: exact names, or
    prefixes written `NAME_*`. Nothing is passed by default; this is the only way a host variable
    reaches sandboxed code."""
    environ = os.environ if environ is None else environ
    exact = {n for n in names if not n.endswith("*")}
    prefixes = tuple(n[:-1] for n in names if n.endswith("*") and len(n) > 1)
    return {k: v for k, v in environ.items() if k in exact or (prefixes and k.startswith(prefixes))}
