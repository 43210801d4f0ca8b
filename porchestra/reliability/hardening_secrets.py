"""Hardening cases for credentials (issue 9, items 2 and 3): secrets under innocent variable names
must not reach the sandboxed code or the processes benchmarks start outside it (SWE-bench commands,
test runs and setup, GAIA2's ARE process); a key must not follow a worker to its own server (the
openai: and litellm: backends); and a key echoed base64, URL-encoded or hex must not reach the log.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from .world import call, complete, delegate, report


def case_innocent_env(root: Path) -> dict[str, Any]:
    """A DSN, a webhook URL with a token and a key under the variable named by api_key_env: none
    may reach the code (read from os.environ and /proc/self/environ inside the sandbox)."""
    from ..envs.base import Task
    from ..envs.general import GeneralEnv
    from ..tools.sandbox import Limits

    canaries = {"DATABASE_URL": f"postgres://app:dsn{uuid.uuid4().hex[:12]}@db/prod",
                "SLACK_HOOK": f"https://hooks.example/T0/{uuid.uuid4().hex}",
                "VENDOR_LLM_CREDS": f"creds{uuid.uuid4().hex}"}
    old = {k: os.environ.get(k) for k in canaries}
    os.environ.update(canaries)
    try:
        env = GeneralEnv(limits=Limits(wall_s=10))
        env.reset(Task(id="env", instruction="x"))
        try:
            r = {t.name: t for t in env.tools()}["execute_python"].run(
                {"code": "import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ').read())"})
        finally:
            env.close()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    seen = [k for k, v in canaries.items() if v in (r.output or "") + (r.error or "")]
    return {"contained": r.ok and not seen, "variables_planted": len(canaries), "visible_to_the_code": seen}


def _planted(canaries: dict[str, str]) -> Callable[[], None]:
    """Put `canaries` into os.environ; returns the function that restores it."""
    old = {k: os.environ.get(k) for k in canaries}
    os.environ.update(canaries)

    def restore() -> None:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return restore


def case_benchmark_children_env(root: Path) -> dict[str, Any]:
    """The same credentials against the processes benchmarks start outside the general sandbox:
    SWE-bench's agent commands, its test runs (the grading path) and a setup step; GAIA2's ARE process
    (its /proc/PID/environ). Each starts from the fixed minimal environment (secrets.minimal_environ)."""
    canaries = {"DATABASE_URL": f"postgres://app:dsn{uuid.uuid4().hex[:12]}@db/prod",
                "SLACK_HOOK": f"https://hooks.example/T0/{uuid.uuid4().hex}"}
    restore = _planted(canaries)
    seen: dict[str, Any] = {}
    try:
        try:
            from ..envs.swebench import SWEBenchBenchmark
            from ..protocol import ToolCall

            bench = SWEBenchBenchmark()
            task = bench.load_tasks({"instances": "fixtures"})[0]
            env = bench.make_env(task, {"local_setup": ["env > ../setup-env.txt"]})
            env.reset(task)
            try:
                ex = env.executor
                views = {"setup step": (ex.repo.parent / "setup-env.txt").read_text(),  # type: ignore[union-attr]
                         "agent command": env.execute(ToolCall(tool="bash", args={"command": "env"}), "w").output,
                         "test run": ex.run_full("env; cat /proc/self/environ").output}  # type: ignore[union-attr]
            finally:
                env.close()
            seen["swebench"] = {n: [k for k, v in canaries.items() if v in text] for n, text in views.items()}
        except ImportError as e:  # the swebench package is a dependency; absent only in odd installs
            seen["swebench"] = {"skipped": str(e)}
        from ..envs.gaia2.client import AREClient
        from ..envs.gaia2.venv import is_ready

        if is_ready():
            with AREClient(timeout_s=120) as client:
                environ = Path(f"/proc/{client._proc.pid}/environ").read_bytes().decode(errors="replace")
            seen["are_process"] = [k for k, v in canaries.items() if v in environ]
        else:
            seen["are_process"] = {"skipped": "ARE's managed venv is not built here"}
    finally:
        restore()
    swe, are = seen["swebench"], seen["are_process"]
    leaked = [f"swebench {n}" for n, ks in swe.items() if ks and n != "skipped"]
    leaked += ["ARE process"] if isinstance(are, list) and are else []
    return {"contained": not leaked, "variables_planted": len(canaries), "leaked_to": leaked, "checked": seen}


def case_litellm_key_endpoints(root: Path) -> dict[str, Any]:
    """The litellm: backend: $OPENAI_API_KEY (with its $OPENAI_BASE_URL) and a provider's own variable
    must not follow a worker that has its own server."""
    import importlib.util

    if importlib.util.find_spec("litellm") is None:
        return {"contained": None, "skipped": "the optional litellm extra is not installed"}
    from ..models.litellm_backend import LiteLLMModel
    from ..models.registry import ModelOptions
    from ..testing.fake_openai import FakeOpenAIServer

    key, ant = f"sk-orch-{uuid.uuid4().hex}", f"sk-ant-{uuid.uuid4().hex}"
    with FakeOpenAIServer(["ok"] * 2) as provider, FakeOpenAIServer(["ok"] * 2) as other:
        restore = _planted({"OPENAI_API_KEY": key, "OPENAI_BASE_URL": provider.base_url, "ANTHROPIC_API_KEY": ant})
        try:
            msgs = [{"role": "user", "content": "hi"}]
            for model in ("openai/m", "hosted_vllm/m"):
                LiteLLMModel(model, ModelOptions(base_url=other.base_url, max_retries=0), role="worker").complete(msgs)
            LiteLLMModel("openai/m", ModelOptions(base_url=provider.base_url, max_retries=0), role="orchestrator"
                         ).complete(msgs)
        finally:
            restore()
        got = [r.authorization or "" for r in other.requests]
        leaks = [n for n, k in (("OPENAI_API_KEY", key), ("ANTHROPIC_API_KEY", ant)) if any(k in a for a in got)]
        reached = any(key in (r.authorization or "") for r in provider.requests)
    return {"contained": not leaks and reached, "keys_sent_to_the_other_server": leaks,
            "provider_got_its_key": reached}


def case_key_endpoints(root: Path) -> dict[str, Any]:
    """$OPENAI_API_KEY (the orchestrator's key for its provider) and a default api_key_env: a worker
    given its own server must not send either there."""
    from ..config import RunConfig
    from ..models.registry import make_model
    from ..testing.fake_openai import FakeOpenAIServer

    key, key2 = f"sk-orch-{uuid.uuid4().hex}", f"sk-default-{uuid.uuid4().hex}"
    saved = {k: os.environ.get(k) for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "H9_DEFAULT_KEY")}
    leaks = []
    try:
        with FakeOpenAIServer(["ok"] * 4) as provider, FakeOpenAIServer(["ok"] * 4) as other:
            os.environ.update(OPENAI_API_KEY=key, OPENAI_BASE_URL=provider.base_url, H9_DEFAULT_KEY=key2)
            msgs = [{"role": "user", "content": "hi"}]
            make_model("openai:m", "orchestrator", RunConfig().options_for("orchestrator")).complete(msgs)
            cfg = RunConfig.model_validate({"model_options": {
                "default": {"api_key_env": "H9_DEFAULT_KEY", "base_url": provider.base_url, "max_retries": 0},
                "worker": {"base_url": other.base_url}}})
            make_model("openai:m", "worker", cfg.options_for("worker")).complete(msgs)
            make_model("openai:m", "worker", RunConfig.model_validate(
                {"model_options": {"worker": {"base_url": other.base_url, "max_retries": 0}}}).options_for(
                "worker")).complete(msgs)
            got = [r.authorization or "" for r in other.requests]
            leaks = [name for name, k in (("OPENAI_API_KEY", key), ("default api_key_env", key2))
                     if any(k in a for a in got)]
            reached = any(key in (r.authorization or "") for r in provider.requests)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"contained": not leaks and reached, "keys_sent_to_the_other_server": leaks,
            "provider_got_its_key": reached}


def case_encoded_secret_in_log(root: Path) -> dict[str, Any]:
    """A worker echoes the key base64-encoded (inside a JSON blob, as `Basic user:key`, URL-safe),
    URL-encoded and hex: no form may reach the event log."""
    from ..config import RunConfig
    from ..envs.base import Task
    from ..loop import Models
    from ..models.scripted import ScriptedModel
    from ..run import run_task
    from .world import VaultEnv

    var, key = "H9_RELIABILITY_API_KEY", f"sk-enc{uuid.uuid4().hex}"
    raw = key.encode()
    forms = {"base64 json": base64.b64encode(json.dumps({"token": key}).encode()).decode(),
             "basic": base64.b64encode(b"user:" + raw).decode(), "urlsafe b64": base64.urlsafe_b64encode(b"x" + raw).decode(),
             "url-encoded": quote("?k=" + key + "&", safe=""), "hex": raw.hex()}
    probes = {"base64 json": base64.b64encode(key.encode())[4:-4].decode(), "basic": forms["basic"][8:-4],
              "urlsafe b64": forms["urlsafe b64"][4:-4], "url-encoded": quote(key, safe=""), "hex": raw.hex()}
    os.environ[var] = key
    try:
        steps = [call("echo", text=f"{n}: {v}") for n, v in forms.items()] + [report("finish", "echoed")]
        models = Models(ScriptedModel([delegate("echo", ["echo"], budget=len(steps) + 1), complete("done")], "s:o"),
                        {"default": ScriptedModel(steps, "s:w")})
        r = run_task(Task(id="enc", instruction="echo"), VaultEnv(), RunConfig(orchestrator_model="scripted:o",
                     worker_model="scripted:w"), out_dir=root / "enc", models=models)
        log = r.events_path.read_text()
    finally:
        os.environ.pop(var, None)
    found = [n for n, p in probes.items() if p in log or forms[n] in log]
    return {"contained": not found and r.reason == "completed", "encodings_tried": len(forms), "in_the_log": found}
