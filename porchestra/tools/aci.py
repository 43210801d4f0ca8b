"""The SWE-bench agent-computer interface (ACI) of the paper's worker prompt: `open`, `goto`,
`scroll_down`, `scroll_up`, `search_file`, `search_dir`, `find_file`, `create` and `edit`, typed as
the COMMAND of a turn like any shell command ("Place ACI keywords such as open and search_file inside
command; they are not native tools"). Anything else is run by bash, so the shell stays available.

The interface keeps a file viewer per environment: the open file and the first line of its window
(WINDOW lines). Every command is carried out by a short Python script run in the workspace through the
environment's own runner (the same checkout, sandbox or container as bash), so it works with the local
and the Docker executors alike. Written for porchestra after SWE-agent's published command set.

    open <path> [<line>]        show the file around <line>
    goto <line>                 move the window of the open file
    scroll_down | scroll_up     move the window by WINDOW lines
    search_file <term> [<path>] lines of the open (or given) file containing <term>
    search_dir <term> [<dir>]   files under <dir> (default .) containing <term>, with match counts
    find_file <name> [<dir>]    files named <name> (glob allowed)
    create <path>               create an empty file and open it
    edit <start>:<end>          replace lines start..end (inclusive) of the open file with the lines
    <replacement lines>         that follow, up to a line `end_of_edit`; the window shows the result
    end_of_edit
"""

from __future__ import annotations

import base64
import json
import shlex
from dataclasses import dataclass
from typing import Callable

WINDOW = 100
COMMANDS = ("open", "goto", "scroll_down", "scroll_up", "search_file", "search_dir", "find_file", "create", "edit")

_SCRIPT = r'''
import base64, fnmatch, json, os, sys
a = json.loads(base64.b64decode("{args}").decode())
op, W = a["op"], a["window"]
def show(path, first):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    first = max(1, min(first, max(len(lines) - W + 1, 1)))
    print(f"[File: {path} ({len(lines)} lines total)]")
    if first > 1:
        print(f"({first - 1} more lines above)")
    for i in range(first, min(first + W, len(lines) + 1)):
        print(f"{i}:{lines[i - 1]}")
    if first + W <= len(lines):
        print(f"({len(lines) - first - W + 1} more lines below)")
    print(f"@@ACI first={first} total={len(lines)}")
if op == "show":
    if not os.path.isfile(a["path"]):
        print(f"File {a['path']} not found"); sys.exit(1)
    show(a["path"], a["first"])
elif op == "create":
    if os.path.exists(a["path"]):
        print(f"File {a['path']} already exists"); sys.exit(1)
    os.makedirs(os.path.dirname(a["path"]) or ".", exist_ok=True)
    open(a["path"], "w").close()
    show(a["path"], 1)
elif op == "edit":
    with open(a["path"], encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    trailing = lines and lines[-1] == ""
    if trailing:
        lines.pop()
    s, e = a["start"], a["end"]
    if s < 1 or e < s - 1 or s > len(lines) + 1:
        print(f"Invalid range {s}:{e} for a file of {len(lines)} lines"); sys.exit(1)
    new = base64.b64decode(a["text"]).decode().split("\n") if a["text"] else []
    lines[s - 1:e] = new
    with open(a["path"], "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + ("\n" if trailing or lines else ""))
    show(a["path"], max(1, s - W // 2))
elif op == "search_file":
    hits = []
    with open(a["path"], encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f, 1):
            if a["term"] in line:
                hits.append(f"{i}:{line.rstrip()}")
    print(f'Found {len(hits)} matches for "{a["term"]}" in {a["path"]}')
    print("\n".join(hits[:100]))
elif op in ("search_dir", "find_file"):
    found = []
    for root, dirs, files in os.walk(a["dir"]):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__")]
        for name in files:
            p = os.path.join(root, name)
            if op == "find_file":
                if fnmatch.fnmatch(name, a["term"]):
                    found.append(p)
                continue
            try:
                with open(p, encoding="utf-8") as f:
                    n = f.read().count(a["term"])
            except (UnicodeDecodeError, OSError):
                continue
            if n:
                found.append(f"{p} ({n} matches)")
    what = "files named" if op == "find_file" else "files containing"
    print(f'Found {len(found)} {what} "{a["term"]}" in {a["dir"]}')
    print("\n".join(sorted(found)[:100]))
'''


class ACIError(ValueError):
    """A malformed ACI command; shown to the worker as the command's error."""


@dataclass
class Viewer:
    path: str | None = None
    first: int = 1


def is_aci(command: str) -> bool:
    head = command.strip().split(None, 1)[0] if command.strip() else ""
    return head in COMMANDS


def _script(args: dict) -> str:
    payload = base64.b64encode(json.dumps(args).encode()).decode()
    return "python3 - <<'PORCHESTRA_ACI_EOF'\n" + _SCRIPT.replace("{args}", payload) + "\nPORCHESTRA_ACI_EOF"


def to_shell(command: str, viewer: Viewer) -> tuple[str, Callable[[str], None]]:
    """The shell command that carries out an ACI command, and how to update the viewer from its output."""
    first_line, _, rest = command.strip().partition("\n")
    try:
        words = shlex.split(first_line)
    except ValueError as e:
        raise ACIError(f"cannot parse {first_line!r}: {e}") from None
    op, argv = words[0], words[1:]

    def need_open() -> str:
        if viewer.path is None:
            raise ACIError(f"{op}: no file is open; use open <path> first")
        return viewer.path

    def track(path: str) -> Callable[[str], None]:
        def update(out: str) -> None:
            for line in out.splitlines():
                if line.startswith("@@ACI first="):
                    viewer.path, viewer.first = path, int(line.split()[1].split("=")[1])
        return update

    def line_no(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise ACIError(f"{op}: {text!r} is not a line number") from None

    if op == "open":
        if not argv:
            raise ACIError("usage: open <path> [<line>]")
        line = line_no(argv[1]) if len(argv) > 1 else 1
        return _script({"op": "show", "path": argv[0], "first": max(1, line - WINDOW // 2), "window": WINDOW}), track(argv[0])
    if op == "goto":
        if len(argv) != 1:
            raise ACIError("usage: goto <line>")
        path = need_open()
        return _script({"op": "show", "path": path, "first": max(1, line_no(argv[0]) - WINDOW // 2),
                        "window": WINDOW}), track(path)
    if op in ("scroll_down", "scroll_up"):
        path = need_open()
        first = viewer.first + (WINDOW if op == "scroll_down" else -WINDOW)
        return _script({"op": "show", "path": path, "first": max(1, first), "window": WINDOW}), track(path)
    if op == "create":
        if len(argv) != 1:
            raise ACIError("usage: create <path>")
        return _script({"op": "create", "path": argv[0], "window": WINDOW}), track(argv[0])
    if op == "search_file":
        if not argv:
            raise ACIError("usage: search_file <term> [<path>]")
        path = argv[1] if len(argv) > 1 else need_open()
        return _script({"op": "search_file", "term": argv[0], "path": path, "window": WINDOW}), lambda out: None
    if op in ("search_dir", "find_file"):
        if not argv:
            raise ACIError(f"usage: {op} <term> [<dir>]")
        return _script({"op": op, "term": argv[0], "dir": argv[1] if len(argv) > 1 else ".",
                        "window": WINDOW}), lambda out: None
    assert op == "edit"
    if len(argv) != 1 or ":" not in argv[0]:
        raise ACIError("usage: edit <start>:<end>, then the replacement lines, then end_of_edit")
    start, end = (line_no(x) for x in argv[0].split(":", 1))
    body = rest.split("\n")
    if "end_of_edit" not in [b.strip() for b in body]:
        raise ACIError("edit: the replacement must end with a line `end_of_edit`")
    text = "\n".join(body[: [b.strip() for b in body].index("end_of_edit")])
    path = need_open()
    return _script({"op": "edit", "path": path, "start": start, "end": end, "window": WINDOW,
                    "text": base64.b64encode(text.encode()).decode()}), track(path)


def strip_marker(output: str) -> str:
    return "\n".join(line for line in output.splitlines() if not line.startswith("@@ACI first="))


def run_aci(env: object, command: str, timeout: float | None = None):
    """Carry out one ACI command in `env`'s current workspace (SWE-bench env: `executor.run`)."""
    from .base import ToolResult  # noqa: PLC0415

    viewer = env.__dict__.setdefault("_aci_viewer", Viewer())
    try:
        shell, update = to_shell(command, viewer)
    except ACIError as e:
        return ToolResult(False, error=str(e))
    res = env.executor.run(shell, timeout)  # type: ignore[attr-defined]
    update(res.output)
    text = strip_marker(res.output).rstrip("\n") or "[no output]"
    if res.timed_out or res.exit_code:
        return ToolResult(False, error=text, data={"exit_code": res.exit_code, "aci": True})
    return ToolResult(True, output=text, data={"exit_code": 0, "aci": True})
