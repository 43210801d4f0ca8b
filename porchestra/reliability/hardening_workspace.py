"""Hardening cases for the workspace and resources (issue 9, items 4 to 6): run files (--out,
--config, .env) inside --workspace are refused; a user's workspace with private files, another
owner's file and a root-only socket keeps every owner, mode and inode; several children together
stay within memory_mb (with a cgroup); a workspace that grows without bound or holds too many files
is stopped with a named limit.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from .hardening_common import _cli, _is_root


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
