"""One orchestrator LLM call with a policy's own template (offline planning), with the same
validation, bounded correction and logging as :meth:`porchestra.agents.Orchestrator.decide`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..agents import AgentFailed
from ..harness import DecisionError
from ..parsing import FormatError, parse_decision

if TYPE_CHECKING:
    from ..loop import Runtime


def ask_with_template(rt: "Runtime", template: str, variables: dict[str, Any], allowed: list[str],
                      validate: Callable[[Any], Any], component: str = "orchestration") -> tuple[Any, Any]:
    messages = [{"role": "user", "content": rt.prompts.render(template, **variables)}]
    corrections: list[dict[str, Any]] = []
    errors = 0
    while True:
        rt.check_global_budget()
        rt.log.next_step()
        call = rt.gateway.call(rt.models.orchestrator, messages + corrections, role="orchestrator",
                               agent_id="orchestrator", defer=True, template=template)
        try:
            decision = parse_decision(call.text, set(allowed))
            plan = validate(decision)
        except (FormatError, DecisionError) as e:
            rt.gateway.record(call, component, decision=None)
            rt.log.emit("format_error", "orchestrator", None, raw=call.text, error=str(e))
            errors += 1
            if errors >= rt.cfg.budgets.max_format_errors:
                raise AgentFailed(f"orchestrator: {errors} consecutive invalid replies; last: {e}")
            corrections = [{"role": "assistant", "content": call.text},
                           {"role": "user", "content": rt.prompts.render(
                               "format_error.j2", error=str(e), consecutive=errors,
                               limit=rt.cfg.budgets.max_format_errors)}]
            continue
        rt.gateway.record(call, component, decision=decision.action)
        return decision, plan
