"""The τ² user simulator: an LLM (role `user`, component `user`) playing the customer.

The agent side talks to it through the `send_message_to_user` tool: the tool's result is the customer's
reply. The simulator's guidelines and scenario text are inspect-evals' (= upstream τ²). With user-side
tools (telecom without solo mode) the simulator may act on its phone by replying with a JSON object
`{"tool": name, "arguments": {...}}`; the result is fed back to it only, never shown to the agent.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from ...tools.base import Tool, render_tools

STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
MAX_USER_TOOL_CALLS = 8  # per customer turn; bounds a simulator stuck in tool calls

TOOL_PROTOCOL = """
## Using your phone
To perform an action on your phone, reply with ONLY a JSON object {{"tool": "<name>", "arguments": {{...}}}}.
The result comes back to you in the next message; the agent does not see it. Then continue.
Your tools:
{tools}
"""


class UserSimulator:
    def __init__(self, guidelines: str, scenario: str, complete: Callable[[list[dict[str, str]]], str],
                 tools: list[Tool] | None = None):
        system = f"{guidelines}\n<scenario>\n{scenario}\n</scenario>\n"
        if tools:
            system += TOOL_PROTOCOL.format(tools=render_tools(tools))
        self.messages: list[dict[str, str]] = [{"role": "system", "content": system}]
        self.complete = complete
        self.tools = {t.name: t for t in tools or []}
        self.stop_token: str | None = None
        self.tool_calls: list[dict[str, Any]] = []  # the user's own actions (ACTION checks)

    @property
    def stopped(self) -> bool:
        return self.stop_token is not None

    def reply(self, agent_message: str) -> str:
        """The customer's answer to one agent message (the agent is the simulator's `user`)."""
        if self.stopped:
            return "[the customer has already left the conversation]"
        self.messages.append({"role": "user", "content": agent_message})
        for _ in range(MAX_USER_TOOL_CALLS + 1):
            text = self.complete(list(self.messages)).strip()
            self.messages.append({"role": "assistant", "content": text})
            call = self._tool_call(text)
            if call is None:
                break
            result = self.tools[call[0]].run(call[1])
            self.tool_calls.append({"tool": call[0], "args": call[1], "ok": result.ok})
            self.messages.append({"role": "user", "content": f"Tool result ({call[0]}): "
                                  f"{result.output if result.ok else result.error}"})
        else:
            text = "###STOP###"  # only tool calls, never an answer: end the conversation
        for token in STOP_TOKENS:
            if token in text:
                self.stop_token = token
                text = text.replace(token, "").strip()
        return text if not self.stopped else f"{text}\n[the customer ended the conversation: {self.stop_token}]".strip()

    def _tool_call(self, text: str) -> tuple[str, dict[str, Any]] | None:
        if not self.tools or not text.startswith("{"):
            return None
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return None
        if not isinstance(obj, dict) or obj.get("tool") not in self.tools:
            return None
        args = obj.get("arguments") or {}
        return (obj["tool"], args) if isinstance(args, dict) else None
