"""Tau2Env: one τ²-bench task as a porchestra Environment.

Mapping onto the orchestrator/worker loop:
- *solo* (telecom): the task is the ticket; workers get the agent tools and the user's phone tools;
  there is no customer to talk to. The orchestrator's end action closes the ticket.
- *with a user simulator* (retail, airline; telecom with solo=false): the task says a customer is
  waiting. Workers talk to the customer with `send_message_to_user(message)`; the tool's result is the
  customer's reply (an LLM of role `user`; its calls go through the Gateway given to
  `bind_gateway`). The orchestrator's end action is also a message to the customer: if the customer
  answers without ending the conversation, `end_turn` returns that answer as the next user message
  and the loop continues. When the customer ends the conversation (###STOP### etc.) `is_stopped()`
  becomes true and the run ends.
"""

from __future__ import annotations

from typing import Any, Callable

from ...models.base import Model, ModelError
from ...models.gateway import Gateway, complete_text
from ...protocol import EndTask, ToolCall
from ...tools.base import Tool, ToolError, ToolResult, tool_from_function
from ..base import Environment, Score, Task
from . import scoring
from .domains import SOLO_DOMAINS, domain_spec, user_simulator_guidelines
from .state import Tau2State, make_tools
from .user_sim import UserSimulator

MAX_END_TURNS = 30  # orchestrator end actions answered by a still-talking customer


class Tau2Env(Environment):
    name = "tau2"
    prompt_set = "tau2"
    end_action = "complete"
    default_budgets = {"global_steps": 300, "worker_steps": 30}

    def __init__(self, domain: str = "telecom", solo: bool | None = None, *,
                 user_model: Model | str | None = None, judge_model: Model | str | None = None):
        domain_spec(domain)  # fail early on a bad domain or a missing installation
        self.domain = domain
        self.solo = (domain in SOLO_DOMAINS) if solo is None else bool(solo)
        if self.solo and domain not in SOLO_DOMAINS:
            raise ValueError(f"solo mode needs a ticket and user-side tools; domain {domain} has neither")
        self._gateway: Gateway | None = None
        self._user_model = user_model  # a Model or a model spec (made on first use)
        self._judge_model = judge_model
        self.task: Task | None = None
        self.state: Tau2State | None = None
        self._tools: list[Tool] = []
        self.user: UserSimulator | None = None
        self.calls: list[dict[str, Any]] = []  # every domain tool call, for ACTION checks
        self.to_user: list[str] = []  # messages the agent side sent to the customer
        self.transcript: list[str] = []  # for the NL-assertion judge
        self._end_turns = 0

    def bind_gateway(self, gateway: Gateway) -> None:
        """The run's Gateway: user-simulator and judge calls are logged through it (roles `user`/`judge`)."""
        self._gateway = gateway

    def bind_models(self, gateway: Gateway, *, user: Model | None = None, judge: Model | None = None) -> None:
        """bind_gateway plus the environment's own LLMs (overriding those given at construction)."""
        self._gateway = gateway
        self._user_model = user if user is not None else self._user_model
        self._judge_model = judge if judge is not None else self._judge_model

    def _llm(self, role: str) -> Callable[[list[dict[str, str]]], str] | None:
        model = self._user_model if role == "user" else self._judge_model
        if model is None:
            return None
        if self._gateway is None:
            raise RuntimeError(f"Tau2Env has a {role} model but no Gateway: call bind_gateway(run gateway) "
                               "so that its calls are logged")
        if isinstance(model, str):
            from ...models.registry import resolve_model

            model = resolve_model(model, role, self._gateway)  # model_options.<role> applied
            if role == "user":
                self._user_model = model
            else:
                self._judge_model = model
        gateway = self._gateway
        return lambda msgs: complete_text(gateway, model, msgs, role=role, component=role, agent_id=role)

    # --- lifecycle -------------------------------------------------------------------------------
    def reset(self, task: Task) -> None:
        self.task = task
        self.state = Tau2State(self.domain, task.payload["task"])
        self._tools = make_tools(self.domain, lambda: self._state(), user_side=self.solo)
        if not self.solo:
            self._tools.append(tool_from_function(self._send_message_to_user, name="send_message_to_user"))
        self.user, self.calls, self.to_user, self.transcript, self._end_turns = None, [], [], [], 0

    def close(self) -> None:
        self.state = None
        self.user = None

    def _state(self) -> Tau2State:
        if self.state is None:
            raise RuntimeError("Tau2Env used before reset()")
        return self.state

    # --- tools -------------------------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        return list(self._tools)

    def execute(self, call: ToolCall, agent_id: str) -> ToolResult:
        if call.tool == "send_message_to_user" and not self.solo:
            # called directly, not through Tool.run, so that a failing user model (ModelError) ends the
            # run with its reason instead of becoming an observation the agent might loop on
            message = (call.args or {}).get("message")
            if not isinstance(message, str) or set(call.args) != {"message"}:
                return ToolResult(False, error="invalid arguments for send_message_to_user: expected {\"message\": <text>}")
            try:
                return ToolResult(True, output=self._send_message_to_user(message))
            except ToolError as e:
                return ToolResult(False, error=str(e))
        result = super().execute(call, agent_id)
        if call.tool != "send_message_to_user":
            self.calls.append({"tool": call.tool, "args": dict(call.args), "ok": result.ok, "agent_id": agent_id})
            self.transcript.append(f"assistant: tool call {call.tool}({call.args})")
            self.transcript.append(f"tool: {result.output if result.ok else result.error}")
        return result

    def _send_message_to_user(self, message: str) -> str:
        """Send a message to the customer. Returns the customer's reply."""
        self.to_user.append(message)
        self.transcript.append(f"assistant: {message}")
        reply = self._simulator().reply(message)
        self.transcript.append(f"user: {reply}")
        return reply

    def _simulator(self) -> UserSimulator:
        if self.user is None:
            complete = self._llm("user")
            if complete is None:
                raise ToolError("no user simulator is configured (set user_model)")
            user_tools = [t for t in make_tools(self.domain, self._state, user_side=True) if t.meta["side"] == "user"]
            scenario = _scenario_text(self._raw())
            self.user = UserSimulator(
                user_simulator_guidelines(with_tools=bool(user_tools)), scenario,
                complete, tools=user_tools)
        return self.user

    def _raw(self) -> dict[str, Any]:
        assert self.task is not None
        return self.task.payload["task"]

    # --- dynamics ----------------------------------------------------------------------------------
    def is_stopped(self) -> bool:
        return self.user is not None and self.user.stopped

    def end_turn(self, end: EndTask) -> str | None:
        message = end.message or end.answer
        if self.solo or self.user is None or self.user.stopped or not message:
            return None
        self._end_turns += 1
        if self._end_turns > MAX_END_TURNS:
            return None
        reply = self._send_message_to_user(message)
        return None if self.user.stopped else reply

    # --- scoring -------------------------------------------------------------------------------------
    def evaluate(self, end: EndTask | None) -> Score:
        raw = self._raw()
        crit = raw.get("evaluation_criteria") or {}
        basis = [str(b) for b in (crit.get("reward_basis") or scoring.DEFAULT_BASIS)]
        messages = list(self.to_user)
        final = (end.message or end.answer) if end is not None else None
        if final and final not in messages[-1:]:
            messages.append(final)
        actions = crit.get("actions") or []
        user_calls = self.user.tool_calls if self.user is not None else []
        components: dict[str, tuple[bool, str]] = {}
        if "DB" in basis:
            components["DB"] = scoring.check_db(self._state(), self.domain, raw)
        if crit.get("env_assertions") is not None:
            components["ENV_ASSERTION"] = scoring.check_env_assertions(self._state(), crit["env_assertions"])
        components["ACTION"] = scoring.check_actions(actions, self.calls + user_calls)
        components["COMMUNICATE"] = scoring.check_communicate(crit.get("communicate_info") or [], messages)
        nl = None
        if crit.get("nl_assertions"):
            nl = self._judge(crit["nl_assertions"], final)
        ended = end is not None or self.is_stopped()
        return scoring.tau2_score(basis=basis, components=components, nl=nl, ended_normally=ended)

    def _judge(self, assertions: list[str], final: str | None) -> dict[str, Any]:
        judge = self._llm("judge")
        if judge is None:
            return {"judged": False, "reason": "no judge model configured", "assertions": assertions}
        transcript = self.transcript + ([f"assistant: {final}"] if final else [])
        try:
            return scoring.judge_nl_assertions(judge, assertions, transcript)
        except ModelError as e:  # the judge is reported apart: its failure must not void the score
            return {"judged": False, "error": f"{type(e).__name__}: {e}", "assertions": assertions}

    def gold(self) -> tuple[list[ToolCall], EndTask] | None:
        crit = self._raw().get("evaluation_criteria") or {}
        calls = [ToolCall(tool=a["name"], args=a.get("arguments") or {})
                 for a in crit.get("actions") or []
                 if self.solo or a.get("requestor", "assistant") == "assistant"]
        message = " ".join(crit.get("communicate_info") or []) or "The request has been handled."
        return calls, EndTask(action="complete", answer=message, message=message)

    def prompt_vars(self) -> dict[str, Any]:
        spec = domain_spec(self.domain)
        return {"domain": self.domain, "solo": self.solo,
                "policy": spec.solo_policy if self.solo and spec.solo_policy else spec.policy}


def _scenario_text(raw: dict[str, Any]) -> str:
    from inspect_evals.tau2.data_model.tasks import UserScenario

    return str(UserScenario.model_validate(raw["user_scenario"]))
