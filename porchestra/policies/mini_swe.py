"""`mini-swe`: the Mini-SWE single agent (paper Appendix, baselines) — its own prompt, one shell-style
command per turn in a linear message history, no structured communication protocol.

Each reply is a THOUGHT followed by exactly one ```bash block. Where the benchmark has a `bash` tool
(SWE-bench), the block is run by it and the agent gets `bash` only. Elsewhere (GAIA, GAIA2, …) the
paper "adapts its tool interface while keeping the execution pattern": each benchmark tool is a
command, `<tool_name> <JSON arguments>` on one line, still one block per turn. The agent ends by
running `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` with the final answer on the lines after it.
A reply in the benchmark's own JSON format is accepted too, so that grammar-constrained local models
(which decode JSON) can drive it. Deviations: docs/modes.md.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ..parsing import FormatError, parse_worker_json
from ..protocol import Evidence, Report, ToolCall
from .single import ReactPolicy

if TYPE_CHECKING:
    from ..context import RunContext as Runtime  # policy hooks get the run's narrow context

MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_BLOCK = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n?(.*?)```", re.S)


def final_answer(command: str) -> str:
    """The answer given with the completion marker: what follows it (`echo MARKER && echo 42`,
    or further lines), without the echo and quotes."""
    rest = command.split(MARKER, 1)[1]
    rest = re.sub(r"^\s*['\"]?\s*(&&|;|\|\|)?\s*", "", rest)
    lines = []
    for line in rest.splitlines():
        line = re.sub(r"^\s*(&&|;)?\s*echo\s+", "", line).strip()
        if len(line) >= 2 and line[0] == line[-1] and line[0] in "'\"":
            line = line[1:-1]
        if line:
            lines.append(line)
    return "\n".join(lines).strip()


def parse_mini_swe(tool_names: list[str], text: str) -> ToolCall | Report:
    blocks = _BLOCK.findall(text)
    if not blocks:
        if text.lstrip().startswith("{"):
            return parse_worker_json(text, {"finish"})
        raise FormatError("Reply with THOUGHT: <reasoning> and then exactly one ```bash code block.")
    if len(blocks) > 1:
        raise FormatError(f"Found {len(blocks)} code blocks; give exactly one ```bash block per reply.")
    command = blocks[0].strip()
    thought = text[: text.find("```")].strip().removeprefix("THOUGHT:").strip()
    if not command:
        raise FormatError("The code block is empty; give one command.")
    if MARKER in command:
        answer = final_answer(command)
        return Report(type="finish", state=thought, evidence=Evidence(raw={"answer": answer} if answer else {}))
    if "bash" in tool_names:
        return ToolCall(tool="bash", args={"command": command}, thought=thought)
    head, _, rest = command.partition(" ")
    head = head.strip()
    if head not in tool_names:
        raise FormatError(f"Unknown command {head!r}. Commands: {', '.join(tool_names)} "
                          f"(as `<command> <JSON arguments>`), or `echo {MARKER}` with your final answer.")
    try:
        args: Any = json.loads(rest) if rest.strip() else {}
    except json.JSONDecodeError as e:
        raise FormatError(f"The arguments of {head} must be one JSON object: {e}") from None
    if not isinstance(args, dict):
        raise FormatError(f"The arguments of {head} must be a JSON object.")
    return ToolCall(tool=head, args=args, thought=thought)


class MiniSwePolicy(ReactPolicy):
    name = "mini-swe"
    worker_templates = ("mini_swe_system.j2", "mini_swe_task.j2")
    solo_context = ""  # the mini-swe prompt says everything; no POrchestra wording

    def tools_for(self, rt: "Runtime") -> list[str]:
        names = rt.tool_names()
        return ["bash"] if "bash" in names else names

    def parse_worker(self, rt: "Runtime", text: str, comm: set[str]) -> ToolCall | Report:
        return parse_mini_swe(rt.tool_names(), text)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "format": "THOUGHT + one ```bash block", "history": "linear"}
