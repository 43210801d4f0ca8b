"""The τ² reward: the product of the checks named in the task's `reward_basis`.

DB (state hash after the agent's actions vs. a fresh replay of the gold actions), ENV_ASSERTION
(predicates on the final environment), ACTION (every gold action matched by a call the agent made),
COMMUNICATE (required facts appear in the agent's messages to the user). NL_ASSERTION needs an LLM
judge: it is evaluated only when a judge model is bound, reported separately, and never folded into
`success` — so scores with and without a judge stay comparable.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Callable

from ..base import Score
from .state import Tau2State, make_tools

DEFAULT_BASIS = ["DB", "COMMUNICATE"]  # upstream EvaluationCriteria default
NOT_REPLAYED = {"calculate", "transfer_to_human_agents"}  # no state change (as inspect-evals' get_expected_db)


def _deep_equal(a: Any, b: Any) -> bool:
    from inspect_evals.tau2.utils import deep_equal_unordered

    return deep_equal_unordered(a, b)


def expected_state(domain: str, task: dict[str, Any], actions: list[dict[str, Any]]) -> Tau2State:
    """A fresh episode with the gold actions replayed through the same tools (failing gold actions
    leave no trace, as in inspect-evals' get_expected_db)."""
    state = Tau2State(domain, task)
    tools = {(t.meta["side"], t.name): t for t in make_tools(domain, lambda: state, user_side=True)}
    for a in actions:
        tool = tools.get((a.get("requestor", "assistant"), a["name"]))
        if a["name"] not in NOT_REPLAYED and tool is not None:
            tool.run(a.get("arguments") or {})
    return state


@lru_cache(maxsize=512)
def gold_db_hashes(domain: str, task_json: str) -> dict[str, str]:
    """DB hashes after the gold replay; a pure function of the task, so computed once per process."""
    task = json.loads(task_json)
    return expected_state(domain, task, (task.get("evaluation_criteria") or {}).get("actions") or []).db_hashes()


def check_db(state: Tau2State, domain: str, task: dict[str, Any]) -> tuple[bool, str]:
    got, want = state.db_hashes(), gold_db_hashes(domain, json.dumps(task, sort_keys=True))
    bad = [side for side in want if got.get(side) != want[side]]
    if bad:
        return False, f"database state differs from the gold replay ({', '.join(bad)} side)"
    return True, "database matches the gold replay"


def check_env_assertions(state: Tau2State, assertions: list[dict[str, Any]]) -> tuple[bool, str]:
    for a in assertions:
        value = state.assert_env(a.get("env_type", "assistant"), a["func_name"], a.get("arguments") or {})
        if value != a.get("assert_value", True):
            return False, (f"assertion {a['func_name']}({a.get('arguments') or {}}) gave {value}, "
                           f"expected {a.get('assert_value', True)}. {a.get('message') or ''}").strip()
    return True, f"{len(assertions)} environment assertion(s) hold"


def action_matched(action: dict[str, Any], calls: list[dict[str, Any]]) -> bool:
    for c in calls:
        if c["tool"] != action["name"]:
            continue
        if action["name"] == "transfer_to_human_agents":
            return True
        keys = action.get("compare_args")
        if keys is not None:
            if not keys or _deep_equal({k: c["args"].get(k) for k in keys},
                                       {k: action["arguments"].get(k) for k in keys}):
                return True
        elif _deep_equal(c["args"], action["arguments"]):
            return True
    return False


def check_actions(actions: list[dict[str, Any]], calls: list[dict[str, Any]]) -> tuple[bool, str]:
    missing = [a["action_id"] for a in actions if not action_matched(a, calls)]
    if missing:
        return False, f"missing gold action(s): {', '.join(missing)}"
    return True, f"all {len(actions)} gold action(s) performed"


def check_communicate(infos: list[str], messages: list[str]) -> tuple[bool, str]:
    said = "\n".join(messages).lower().replace(",", "")
    missing = [i for i in infos if i.lower() not in said]
    if missing:
        return False, f"not communicated to the user: {', '.join(missing)}"
    return True, f"all {len(infos)} required fact(s) communicated"


JUDGE_PROMPT = """You evaluate a customer-service conversation against expected outcomes.
For each expected outcome decide whether the conversation satisfies it. Reply with JSON only:
{{"results": [{{"expectedOutcome": "...", "reasoning": "...", "metExpectation": true|false}}, ...]}}

<conversation>
{conversation}
</conversation>
<expected_outcomes>
{outcomes}
</expected_outcomes>"""


def judge_nl_assertions(judge: Callable[[list[dict[str, str]]], str], assertions: list[str],
                        transcript: list[str]) -> dict[str, Any]:
    prompt = JUDGE_PROMPT.format(conversation="\n".join(transcript), outcomes="\n".join(f"- {a}" for a in assertions))
    raw = judge([{"role": "user", "content": prompt}])
    match = re.search(r"\{.*\}", raw, re.S)
    try:
        results = json.loads(match.group(0))["results"] if match else None
        met = [bool(r["metExpectation"]) for r in results]
        if len(met) != len(assertions):
            raise ValueError(f"{len(met)} verdicts for {len(assertions)} assertions")
    except (ValueError, KeyError, TypeError) as e:
        return {"judged": False, "error": f"unparseable judge reply: {e}", "raw": raw[:2000]}
    return {"judged": True, "passed": all(met), "results": results}


def tau2_score(*, basis: list[str], components: dict[str, tuple[bool, str]], nl: dict[str, Any] | None,
               ended_normally: bool) -> Score:
    checked = {k: v for k, v in components.items() if k in basis}
    success = ended_normally and all(ok for ok, _ in checked.values())
    reasons = [f"{k}: {msg}" for k, (ok, msg) in checked.items() if not ok]
    if not ended_normally:
        reasons.insert(0, "the episode ended without an end action or user stop")
    details: dict[str, Any] = {
        "reward_basis": basis,
        "checks": {k: {"ok": ok, "detail": msg, "in_basis": k in basis} for k, (ok, msg) in components.items()},
    }
    if nl is not None:
        details["nl_assertions"] = {**nl, "in_basis": "NL_ASSERTION" in basis,
                                    "note": "reported separately; not part of success"}
    return Score(success=success, score=1.0 if success else 0.0,
                 reason="; ".join(reasons) or "all checks in the reward basis passed", details=details)
