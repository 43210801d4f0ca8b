"""Property 8 — hardening: attacks on what runs model-written code that the escape suite does not
try, one case per class, each judged from outside: a concurrent racer swapping a workspace directory
for a symlink to a root-only file while host-side file tools run (directly, and through real episodes
in the parallel modes proactive-concurrent and orchestra-o1); credentials under innocent variable
names; one role's key sent to another role's server, or written to the log base64/URL/hex-encoded; run
files (--out, --config, .env) inside --workspace; a user's workspace with private files, other owners'
files and a root-only socket; several children each taking the whole memory limit, a workspace that
grows without bound or holds too many files; two evals on one --out, task ids that collide as
directory names; alias bombs, unknown keys, file or read-only paths and a full disk during an eval.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from .result import PropertyResult
from .world import call, complete, delegate, report

BENCH = "porchestra.reliability.world:VaultBenchmark"
RACER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
os.chdir(sys.argv[1]); end = time.monotonic() + float(sys.argv[2]); n = 0
while time.monotonic() < end:
    libc.renameat2(-100, b"d", -100, b"l", 2)  # RENAME_EXCHANGE: the directory and the symlink swap places
    n += 1
print("SWAPS", n)
"""


def _is_root() -> bool:
    return os.geteuid() == 0


def _cli(args: list[str], cwd: Path | str, env: dict[str, str] | None = None, timeout: float = 300,
         mem_mb: int | None = None) -> subprocess.CompletedProcess:
    pre = None
    if mem_mb:
        import resource

        def pre() -> None:  # an alias bomb must not take the machine down when it is not contained
            resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
    try:
        return subprocess.run([sys.executable, "-m", "porchestra.cli", *args], capture_output=True, text=True,
                              cwd=cwd, env={**os.environ, "COLUMNS": "300", **(env or {})}, timeout=timeout,
                              preexec_fn=pre)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(e.cmd, 124, "", f"timed out after {timeout} s")


def _race_layout(root: Path) -> tuple[Path, Path, str]:
    ws, secret = root / "ws", root / "secret"
    ws.mkdir()
    secret.mkdir()
    canary = f"ROOT-ONLY-{uuid.uuid4().hex}"
    (secret / "f.txt").write_text(canary)
    os.chmod(secret / "f.txt", 0o600)
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("inside")
    os.symlink(secret, ws / "l")
    return ws, secret, canary


def case_file_tool_race(root: Path, seconds: float) -> dict[str, Any]:
    """A racer process exchanges ws/d and a symlink to a root-only directory in a loop while the
    file tools read, write and list d/."""
    from ..tools.files import make_file_tools

    ws, secret, canary = _race_layout(root)
    racer = subprocess.Popen([sys.executable, "-c", RACER, str(ws), str(seconds)], stdout=subprocess.PIPE, text=True)
    time.sleep(0.1)
    tools = {t.name: t for t in make_file_tools(ws)}
    calls = leaks = 0
    end = time.monotonic() + seconds - 0.2
    while time.monotonic() < end:
        r = tools["read_file"].run({"path": "d/f.txt"})
        leaks += canary in (r.output or "")
        tools["write_file"].run({"path": f"d/w{calls}.txt", "content": "x"})
        tools["list_files"].run({"path": "d"})
        calls += 1
    out = racer.communicate(timeout=30)[0]
    escaped = sum(1 for p in secret.iterdir() if p.name.startswith("w"))
    return {"contained": leaks == 0 and escaped == 0, "tool_calls": 3 * calls,
            "swaps": int(out.split()[-1]) if out.strip() else 0, "root_only_reads": leaks, "writes_outside": escaped}


class _Routed:
    """A scripted model whose reply list is chosen by a key in the prompt (or a function of it)."""

    def __init__(self, routes: dict[str, list[str]] | Callable[[list[dict]], str], name: str):
        import threading

        self.name, self.routes, self._lock = name, routes, threading.Lock()

    def complete(self, messages, *, schema=None, max_tokens=None):
        from ..models.base import Completion, Usage

        with self._lock:
            if callable(self.routes):
                text = self.routes(messages)
            else:
                blob = "\n".join(str(m.get("content", "")) for m in messages[:2])
                key = next(k for k in self.routes if k in blob)
                text = self.routes[key].pop(0) if self.routes[key] else report("finish", "out of steps")
        return Completion(text=text, usage=Usage(10, 10))


def case_race_in_mode(root: Path, mode: str, reads: int, seconds: float) -> dict[str, Any]:
    """The same race through a real episode: worker RACE runs the racer in the sandbox while worker
    READ, at the same time, calls read_file / write_file / list_files on d/."""
    from ..config import RunConfig
    from ..envs.base import Task
    from ..envs.general import GeneralEnv
    from ..log.events import read_events
    from ..loop import Models
    from ..policies import make_policy
    from ..run import run_task
    from ..tools.sandbox import Limits

    parent = root / mode
    parent.mkdir()
    os.chmod(parent, 0o755)
    ws, secret, canary = _race_layout(parent)
    race = [call("execute_python", code=RACER.replace("sys.argv[1]", "'.'").replace("sys.argv[2]",
                                                                                             repr(str(seconds)))),
            report("finish", "RACE-DONE")]
    steps = [call("execute_python", code="import time; time.sleep(0.4)")]
    for i in range(reads):
        steps += [call("read_file", path="d/f.txt"), call("write_file", path=f"d/w{i}.txt", content="x"),
                  call("list_files", path="d")]
    worker = _Routed({"sub-RACE": race, "sub-READ": steps + [report("finish", "READ-DONE")]}, "scripted:w")
    batch = json.dumps({"action": "delegate_tasks", "reasoning": "both at once", "params": {"tasks": [
        {"task_instruction": f"sub-{n}", "context": "", "tools": ["execute_python", "read_file", "write_file",
                                                                   "list_files"], "step_budget": 3 * reads + 5}
        for n in ("RACE", "READ")]}})

    def orchestrate(msgs: list[dict]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in msgs)
        if "sub-READ" not in text:
            return batch
        done = text.count(" finish] subgoal:") + (1 if "finish" in text.rsplit("Current SubAgent", 1)[-1] else 0)
        if mode == "orchestra-o1" or done >= 2 or ("RACE-DONE" in text and "READ-DONE" in text):
            return complete("done")
        return json.dumps({"action": "wait", "reasoning": "the other worker is still running"})

    cfg = RunConfig(orchestrator_model="scripted:o", worker_model="scripted:w", mode=mode,
                    budgets={"global_steps": 6 * reads + 40, "worker_steps": 3 * reads + 5, "max_parallel": 2})
    env = GeneralEnv(limits=Limits(wall_s=seconds + 5, memory_mb=512, max_procs=32))
    out = root / f"{mode}-run"
    # GeneralEnv makes its own (run-private) temp workspace; the race layout is put there at reset
    orig_reset = env.reset

    def reset(task: Task) -> None:
        orig_reset(task)
        shutil.rmtree(env.workspace)
        shutil.copytree(ws, env.workspace, symlinks=True)
        os.chmod(env.workspace, 0o755)

    env.reset = reset  # type: ignore[method-assign]
    r = run_task(Task(id=f"race-{mode}", instruction="race"), env, cfg, out_dir=out,
                 models=Models(_Routed(orchestrate, "scripted:o"), {"default": worker}), policy=make_policy(mode))
    ev = read_events(r.events_path)
    tools = [e for e in ev if e["event"] == "tool_call"]
    texts = " ".join(str(e["output"]["text"]) + str(e.get("error") or "") for e in tools)
    escaped = sum(1 for p in secret.iterdir() if p.name.startswith("w"))
    racer_out = next((str(e["output"]["text"]) for e in tools if "SWAPS" in str(e["output"]["text"])), "")
    overlap = _overlap(tools)
    return {"contained": canary not in texts and escaped == 0, "reason": r.reason[:80], "tool_calls": len(tools),
            "racer_swaps": racer_out.split()[-1] if racer_out else "?", "file_calls_during_race": overlap,
            "root_only_reads": texts.count(canary), "writes_outside": escaped}


def _overlap(tools: list[dict[str, Any]]) -> int:
    """READ's file-tool calls logged before RACE's execute_python returned: made while the racer ran
    (READ starts them after its own 0.4 s sandbox call, which began with the racer's)."""
    race = next((e for e in tools if "SWAPS" in str(e["output"]["text"])), None)
    if race is None:
        return 0
    return sum(1 for e in tools if e.get("tool") in ("read_file", "write_file", "list_files")
               and e.get("ts", "") < race.get("ts", ""))


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


def case_run_files_in_workspace(root: Path) -> dict[str, Any]:
    """--out, --config and a .env inside --workspace: each run must exit 2 and write nothing."""
    ws = root / "rfw"
    ws.mkdir()
    (ws / "c.yaml").write_text("budgets: {global_steps: 5}\n")
    base = ["run", "x", "--allow-unisolated", "--workspace", str(ws)]
    runs = {"--out inside": (base + ["--out", str(ws / "out")], root),
            "--config inside": (base + ["--config", str(ws / "c.yaml"), "--out", str(root / "o2")], root),
            ".env inside (cwd)": (["run", "x", "--allow-unisolated", "--workspace", ".", "--out", str(root / "o3")], ws)}
    (ws / ".env").write_text("OPENAI_BASE_URL=http://127.0.0.1:9/v1\n")
    refused = {}
    for name, (args, cwd) in runs.items():
        if name != ".env inside (cwd)":
            (ws / ".env").rename(root / "env.aside")
        p = _cli(args, cwd, timeout=120)
        if name != ".env inside (cwd)":
            (root / "env.aside").rename(ws / ".env")
        written = any((d / "events.jsonl").exists() for d in (ws / "out", root / "o2", root / "o3"))
        refused[name] = p.returncode == 2 and "inside the workspace" in p.stderr and not written
    return {"contained": all(refused.values()), "refused": refused}


def case_workspace_ownership(root: Path) -> dict[str, Any]:
    """A user's workspace holds a 0600 file, another user's 0640 file and a root-only socket; the code
    lists, reads and chmods; afterwards every entry keeps owner, mode and inode."""
    from ..envs.base import Task
    from ..envs.general import GeneralEnv
    from ..tools.sandbox import Limits

    ws = root / "own"
    ws.mkdir()
    os.chmod(ws, 0o755)
    (ws / "pub.txt").write_text("public")
    (ws / "priv.txt").write_text("PRIVATE-0600")
    os.chmod(ws / "priv.txt", 0o600)
    (ws / "other.txt").write_text("OTHER-USER")
    os.chmod(ws / "other.txt", 0o640)
    if _is_root():
        os.chown(ws / "other.txt", 4242, 4242)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "root.sock"))
    os.chmod(ws / "root.sock", 0o600)
    before = {p.name: (p.lstat().st_uid, p.lstat().st_gid, p.lstat().st_mode) for p in ws.iterdir()}
    code = ("import os, socket\nfor n in sorted(os.listdir('.')):\n    try:\n        print(n, open(n).read()[:20])\n"
            "    except OSError as e:\n        print(n, type(e).__name__)\n"
            "s = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('root.sock'); print('SOCKET-CONNECTED')\n"
            "except OSError as e:\n    print('socket', type(e).__name__)\n"
            "for n in os.listdir('.'):\n    try:\n        os.chmod(n, 0o777)\n    except OSError:\n        pass\n"
            "open('made.txt', 'w').write('by code')\n")
    env = GeneralEnv(workspace=ws, limits=Limits(wall_s=10))
    env.reset(Task(id="own", instruction="x"))
    try:
        r = {t.name: t for t in env.tools()}["execute_python"].run({"code": code})
    finally:
        env.close()
        sock.close()
    after = {p.name: (p.lstat().st_uid, p.lstat().st_gid, p.lstat().st_mode) for p in ws.iterdir()}
    changed = sorted(n for n in before if after.get(n) != before[n])
    out = (r.output or "") + (r.error or "")
    exposed = [x for x in ("PRIVATE-0600", "OTHER-USER", "SOCKET-CONNECTED") if x in out]
    synced = (ws / "made.txt").exists()
    return {"contained": not changed and not exposed and synced, "entries_changed": changed,
            "exposed_to_the_code": exposed, "code_output_synced_back": synced}


def case_memory_of_children(root: Path, memory_mb: int = 256, children: int = 4) -> dict[str, Any]:
    """`children` processes each touching 70% of memory_mb: bounded as a whole only with a cgroup."""
    from ..tools.sandbox import Limits, Sandbox

    ws = root / "mem"
    ws.mkdir()
    os.chmod(ws, 0o755)
    sb = Sandbox(ws, limits=Limits(wall_s=20, memory_mb=memory_mb, max_procs=32))
    each = int(memory_mb * 0.7)
    code = (f"import os, time\nkids = []\nfor i in range({children}):\n    pid = os.fork()\n    if pid == 0:\n"
            f"        try:\n            b = bytearray({each} << 20)\n            for j in range(0, len(b), 4096):\n"
            "                b[j] = 1\n            time.sleep(1.5)\n            print('HELD', flush=True)\n"
            "        except MemoryError:\n            pass\n        os._exit(0)\n    kids.append(pid)\n"
            "for k in kids:\n    os.waitpid(k, 0)\n")
    r = sb.run_python(code)
    held = r.stdout.count("HELD")
    return {"contained": held * each <= memory_mb, "limit_scope": getattr(r, "limit_scope", "per-process"),
            "children": children, "mb_each": each, "children_that_held_it": held,
            "sandbox_peak_mb": getattr(r, "memory_peak_mb", None)}


def case_workspace_growth(root: Path, workspace_mb: int = 32, entries: int = 2000) -> dict[str, Any]:
    """The code writes 4× workspace_mb (files under the per-file limit), then makes 3× the entry cap
    of files: it is stopped / refused with a named limit, and the host-side steps stay bounded."""
    from ..tools.sandbox import Limits, Sandbox

    ws = root / "grow"
    ws.mkdir()
    os.chmod(ws, 0o755)
    sb = Sandbox(ws, limits=Limits(wall_s=20, workspace_mb=workspace_mb, workspace_entries=entries,
                                   file_mb=workspace_mb))
    chunk = max(1, workspace_mb // 4)
    r1 = sb.run_python(f"import time\nfor i in range(16):\n    open(f'big{{i}}', 'wb').write(b'x' * ({chunk} << 20))\n"
                       "    time.sleep(0.2)\nprint('WROTE ALL')")
    used = sum(p.stat().st_size for p in ws.iterdir()) >> 20
    for p in ws.iterdir():
        p.unlink()
    r2 = sb.run_python(f"import os\nos.makedirs('many', exist_ok=True)\nfor i in range({3 * entries}):\n"
                       "    open(f'many/{i}', 'w').close()\nprint('MADE')")
    t0 = time.monotonic()
    r3 = sb.run_python("print('next call')")
    host_s = round(time.monotonic() - t0, 2)
    stopped = "WROTE ALL" not in r1.stdout and "workspace_mb" in r1.stderr
    refused = "workspace_entries" in (r2.stderr + r3.stderr) and "next call" not in r3.stdout
    return {"contained": stopped and refused and used <= 2 * workspace_mb, "size_limit_mb": workspace_mb,
            "mb_written_before_stop": used, "entry_limit": entries, "next_call_refused": refused,
            "next_call_s": host_s}


def _eval_args(root: Path, out: Path, n: int, extra: dict[str, Any] | None = None, conc: int = 1) -> list[str]:
    o, w, cfg = root / "ho.json", root / "hw.json", root / f"hcfg-{uuid.uuid4().hex[:6]}.json"
    o.write_text(json.dumps([delegate("find alpha", ["lookup"]), complete("17")]))
    w.write_text(json.dumps([call("lookup", key="alpha"), report("finish", "alpha is 17")]))
    cfg.write_text(json.dumps({"env_options": {"n": n, **(extra or {})}}))
    return ["eval", BENCH, "--config", str(cfg), "--orchestrator-model", f"scripted:{o}", "--worker-model",
            f"scripted:{w}", "--out", str(out), "--max-concurrency", str(conc), "-q"]


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def case_two_evals(root: Path, n: int = 200) -> dict[str, Any]:
    """A second `porchestra eval` on an --out that another one is writing."""
    out = root / "two"
    first = subprocess.Popen([sys.executable, "-m", "porchestra.cli", *_eval_args(root, out, n)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while first.poll() is None and not _rows(out / "results.jsonl") and time.monotonic() < deadline:
        time.sleep(0.05)
    second = _cli(_eval_args(root, out, n), root, timeout=300)
    first.wait(timeout=600)
    rows = _rows(out / "results.jsonl")
    keys = [(r["task_id"], r["trial"]) for r in rows]
    named = str(first.pid) in second.stderr
    ok = second.returncode == 2 and named and len(keys) == len(set(keys)) == n
    return {"contained": ok, "second_exit_code": second.returncode, "holder_pid_named": named,
            "rows": len(keys), "distinct": len(set(keys)), "tasks": n}


def case_colliding_ids(root: Path) -> dict[str, Any]:
    """Ids equal once sanitised or truncated (`a/b`, `a_b`, `a b`, `a:b`, 150-char ids differing at
    the end), three at a time: one directory and one clean log each."""
    from .world import COLLIDING

    out = root / "collide"
    p = _cli(_eval_args(root, out, len(COLLIDING), {"colliding_ids": True}, conc=3), root, timeout=300)
    rows = _rows(out / "results.jsonl")
    dirs = {r["events"] for r in rows}
    clean = 0
    for r in rows:
        log = out / r["events"]
        ev = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        clean += bool(ev) and ev[0].get("task_id") == r["task_id"] and ev[-1]["event"] == "task_end"
    return {"contained": p.returncode == 0 and len(dirs) == len(rows) == len(COLLIDING) == clean,
            "ids": len(COLLIDING), "task_dirs": len(dirs), "clean_logs": clean}


BOMB = "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9) if p else ', '.join(['lol'] * 9)}]\n"
               for p, c in zip(["", *"abcdefgh"], "abcdefghi"))


BENCH_TYPOS = {"gaia": "serach", "gaia2": "scenarioz", "swebench": "excutor", "tau2": "domian", "bfcl": "categroy"}


def case_bad_input(root: Path, disk_tasks: int = 60) -> dict[str, Any]:
    """Each must exit 2 naming the problem, with nothing written; the full disk keeps results.jsonl
    whole and a resume (after space is freed) finishes every task exactly once."""
    d = root / "bad"
    d.mkdir()
    (d / "bomb.yaml").write_text(f"env_options:\n  {BOMB.replace(chr(10), chr(10) + '  ')}\n".rstrip() + "\n")
    (d / "envopt.yaml").write_text("env_options: {isolaton: bwrap}\n")
    (d / "lim.yaml").write_text("env_options: {limits: {memory_mbs: 64}}\n")
    (d / "task.yaml").write_text("id: t\ninstruction: say hi\nmetdata: {answer: hi}\n")
    (d / "afile").write_text("x")
    cases = {"yaml alias bomb": (["run", "x", "--config", str(d / "bomb.yaml")], "alias"),
             "unknown env_options key": (["run", "x", "--config", str(d / "envopt.yaml")], "isolaton"),
             # every benchmark declares its options: a misspelling is refused before it loads anything
             **{f"misspelled {b} option": (["eval", b, "--policy", "gold", "-O", f"{typo}=x"], typo)
                for b, typo in BENCH_TYPOS.items()},
             "misspelled sandbox limit": (["run", "x", "--config", str(d / "lim.yaml")], "memory_mbs"),
             "unknown task-file key": (["run", f"@{d / 'task.yaml'}"], "metdata"),
             "workspace is a file": (["run", "x", "--workspace", str(d / "afile")], "is a file"),
             "--out is a file": (["run", "x", "--out", str(d / "afile")], "is a file")}
    mounted: list[Path] = []
    if _is_root() and shutil.which("mount"):
        ro = d / "ro"
        ro.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(ro)]).returncode == 0:
            mounted.append(ro)
            cases["--out on a read-only file system"] = (["run", "x", "--out", str(ro / "o")], "read-only")
    results: dict[str, Any] = {}
    for name, (args, needle) in cases.items():
        out_flag = [] if "--out" in args else ["--out", str(d / f"out-{len(results)}")]
        t0 = time.monotonic()
        p = _cli(args + out_flag + (["--allow-unisolated"] if args[0] == "run" else []), d, timeout=60, mem_mb=2048)
        wrote = not ("--out" in args) and (d / f"out-{len(results)}").exists()
        results[name] = {"exit": p.returncode, "named": needle in " ".join(p.stderr.split()), "written": wrote,
                         "s": round(time.monotonic() - t0, 1)}
    try:
        disk = _full_disk(d, disk_tasks, mounted) if _is_root() else {"skipped": "needs root to mount a small tmpfs"}
    except Exception as e:  # noqa: BLE001 — e.g. a corrupt results.jsonl: not contained
        disk = {"contained": False, "crash": f"{type(e).__name__}: {e}"[:200]}
    finally:
        for m in mounted:
            subprocess.run(["umount", "-l", str(m)])
    ok = all(r["exit"] == 2 and r["named"] and not r["written"] for r in results.values())
    ok = ok and disk.get("contained", True)
    return {"contained": ok, "full_disk": disk, "cases": results}


def _full_disk(d: Path, n: int, mounted: list[Path]) -> dict[str, Any]:
    """An eval on a 600 KiB tmpfs: it fills up midway; then the tmpfs grows and the eval resumes."""
    small = d / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(small)]).returncode != 0:
        return {"skipped": "mount refused"}
    mounted.append(small)
    out = small / "ev"
    args = _eval_args(d, out, n)
    p = _cli(args, d, timeout=600)
    try:
        rows_full = len(_rows(out / "results.jsonl"))
        intact = (out / "results.jsonl").read_bytes().endswith(b"\n")
    except (ValueError, OSError):  # a torn or merged row
        rows_full, intact = -1, False
    subprocess.run(["mount", "-o", "remount,size=16m", str(small)])
    again = _cli(args, d, timeout=600)
    rows = _rows(out / "results.jsonl")
    keys = [(r["task_id"], r["trial"]) for r in rows]
    named = "No space left" in " ".join(p.stderr.split()) or "cannot take more data" in p.stderr
    ok = p.returncode == 2 and named and intact and 0 < rows_full < n and again.returncode == 0 \
        and len(keys) == len(set(keys)) == n
    return {"contained": ok, "exit_when_full": p.returncode, "named": named, "rows_when_full": rows_full,
            "results_intact": intact, "resume_exit": again.returncode, "rows_after_resume": len(keys), "tasks": n}


# (key, item of issue 9, what the attack does, runner(root, settings))
CASES: list[tuple[str, int, str, Callable[[Path, dict[str, Any]], dict[str, Any]]]] = [
    ("file_tool_race", 1, "a racer exchanges ws/d with a symlink to a root-only dir while read/write/list run",
     lambda r, s: case_file_tool_race(r, s["race_s"])),
    ("file_tool_race_proactive_concurrent", 1, "the race through an episode: worker RACE runs it in the sandbox, "
     "worker READ uses the file tools at the same time", lambda r, s: case_race_in_mode(r, "proactive-concurrent",
                                                                                         s["reads"], s["race_s"])),
    ("file_tool_race_orchestra_o1", 1, "the same in an orchestra-o1 round",
     lambda r, s: case_race_in_mode(r, "orchestra-o1", s["reads"], s["race_s"])),
    ("innocently_named_credentials", 2, "DATABASE_URL, a webhook URL with a token, the api_key_env variable",
     lambda r, s: case_innocent_env(r)),
    ("benchmark_children_see_credentials", 2, "the same variables vs SWE-bench's commands, test runs and setup, "
     "and GAIA2's ARE process", lambda r, s: case_benchmark_children_env(r)),
    ("key_sent_to_another_role_server", 3, "$OPENAI_API_KEY and a default api_key_env vs a worker's own server",
     lambda r, s: case_key_endpoints(r)),
    ("litellm_key_sent_to_another_server", 3, "litellm: $OPENAI_API_KEY and ANTHROPIC_API_KEY vs a worker's own "
     "server", lambda r, s: case_litellm_key_endpoints(r)),
    ("encoded_key_in_the_log", 3, "the key echoed base64 (in JSON, as Basic, URL-safe), URL-encoded and hex",
     lambda r, s: case_encoded_secret_in_log(r)),
    ("run_files_inside_workspace", 4, "--out, --config and .env inside --workspace",
     lambda r, s: case_run_files_in_workspace(r)),
    ("workspace_reowned_or_widened", 5, "0600 file, another user's file, root-only socket in a given workspace",
     lambda r, s: case_workspace_ownership(r)),
    ("children_share_memory_limit", 6, "4 children each touch 70% of memory_mb",
     lambda r, s: case_memory_of_children(r)),
    ("workspace_growth_and_file_count", 6, "write 4x workspace_mb; make 3x workspace_entries files",
     lambda r, s: case_workspace_growth(r)),
    ("two_evals_one_out", 7, "a second eval on an --out being written", lambda r, s: case_two_evals(r, s["eval_tasks"])),
    ("colliding_task_ids", 7, "a/b, a_b, a b, a:b, two 150-char ids sharing a prefix; 3 at a time",
     lambda r, s: case_colliding_ids(r)),
    ("bad_input_and_full_disk", 8, "alias bomb, unknown keys, file/read-only paths, a disk filling mid-eval",
     lambda r, s: case_bad_input(r, s["disk_tasks"])),
]


def run_hardening(race_s: float = 2.0, reads: int = 30, eval_tasks: int = 200, disk_tasks: int = 60,
                  only: list[str] | None = None, workdir: str | Path | None = None) -> PropertyResult:
    from ..tools.sandbox import available_isolation

    res = PropertyResult(key="hardening", title="Hardening (issue 9)")
    settings = {"race_s": race_s, "reads": reads, "eval_tasks": eval_tasks, "disk_tasks": disk_tasks}
    sandboxed = available_isolation()[0] != "none"
    outcomes: dict[str, Any] = {}
    for key, item, what, fn in CASES:
        if only and key not in only:
            continue
        if not sandboxed and key in ("file_tool_race_proactive_concurrent", "file_tool_race_orchestra_o1",
                                     "innocently_named_credentials", "benchmark_children_see_credentials", "workspace_reowned_or_widened",
                                     "children_share_memory_limit", "workspace_growth_and_file_count"):
            outcomes[key] = {"item": item, "attempt": what, "contained": None, "skipped": "no sandbox here"}
            continue
        with tempfile.TemporaryDirectory(prefix="porchestra-rel-hard-", dir=workdir) as tmp:
            os.chmod(tmp, 0o755)
            try:
                got = fn(Path(tmp), settings)
            except Exception as e:  # noqa: BLE001 — a crash is a failed case
                got = {"contained": False, "crash": f"{type(e).__name__}: {e}"[:300]}
        if key == "children_share_memory_limit" and not got.get("contained") and got.get("limit_scope") == "per-process":
            res.notes.append("no cgroup could be made here: memory_mb bounds each process, not the sandbox "
                             f"({got.get('children_that_held_it')} children held {got.get('mb_each')} MB each)")
            got["contained"] = None  # the documented fallback, reported, not a failure
        outcomes[key] = {"item": item, "attempt": what, **got}
        if got.get("contained") is False:
            res.fail(f"{key}: {json.dumps(got, default=str)[:400]}")
    res.figures = {"settings": settings, "cases": len(outcomes),
                   "contained": sum(o.get("contained") is True for o in outcomes.values()),
                   "fallback_or_skipped": sum(o.get("contained") is None for o in outcomes.values()),
                   "outcomes": outcomes}
    return res
