"""τ²-bench domains as shipped by the pinned `inspect-evals` package (tools, databases, policies, tasks).

Everything is imported from `inspect_evals.tau2` at call time: nothing of the benchmark is copied into
porchestra. Its tools are inspect-ai `@tool` functions over store-backed toolkits; :mod:`.state` runs
them outside an inspect sample.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Callable

from ..benchmark import BenchmarkError

INSPECT_EVALS_PIN = "0.28.0"
DOMAINS = ("telecom", "retail", "airline")
SOLO_DOMAINS = ("telecom",)  # domains whose tasks carry a ticket and whose user side is a toolkit


@dataclass(frozen=True)
class DomainSpec:
    name: str
    agent_tools: list[Callable[[], Any]]  # inspect-ai tool factories
    user_tools: list[Callable[[], Any]]  # telecom only: the user's phone
    policy: str
    solo_policy: str | None


def _import_error(e: ImportError) -> BenchmarkError:
    return BenchmarkError(
        f"τ²-bench needs inspect-evals=={INSPECT_EVALS_PIN} and inspect-ai (see the tau2 install notes): {e}")


def _data_dir() -> Any:
    try:
        return resources.files("inspect_evals.tau2") / "data" / "domains"
    except ModuleNotFoundError as e:
        raise _import_error(e) from None


def _read(path: Any) -> str:
    return path.read_text(encoding="utf-8")


@lru_cache(maxsize=8)
def domain_spec(name: str) -> DomainSpec:
    try:
        if name == "retail":
            from inspect_evals.tau2.retail.tools import all_retail_tools as tools
        elif name == "airline":
            from inspect_evals.tau2.airline.tools import all_airline_tools as tools
        elif name == "telecom":
            from inspect_evals.tau2.telecom.tools import all_telecom_agent_tools as tools
            from inspect_evals.tau2.telecom.user_tools import all_telecom_user_tools as user_tools
        else:
            raise BenchmarkError(f"option domain={name!r}: choose one of {', '.join(DOMAINS)} "
                                 "(inspect-evals ships mock data but no mock tools)")
    except ImportError as e:
        raise _import_error(e) from None
    d = _data_dir() / name
    if name == "telecom":
        # the same composition as inspect-evals' get_domain_policy / upstream's solo policy
        main, solo = _read(d / "main_policy.txt"), _read(d / "main_policy_solo.txt")
        policy = (f"<main_policy>\n{main}\n</main_policy>\n<tech_support_policy>\n"
                  f"{_read(d / 'tech_support_manual.txt')}\n</tech_support_policy>")
        solo_policy = (f"<main_policy>\n{solo}\n</main_policy>\n<tech_support_policy>\n"
                       f"{_read(d / 'tech_support_workflow_solo.txt')}\n</tech_support_policy>")
        return DomainSpec(name, list(tools), list(user_tools), policy, solo_policy)
    return DomainSpec(name, list(tools), [], f"<policy>\n{_read(d / 'policy.txt')}\n</policy>", None)


@lru_cache(maxsize=8)
def _raw_tasks(name: str) -> tuple[dict[str, Any], ...]:
    d = _data_dir() / name
    plain, packed = d / "tasks.json", d / "tasks.json.gz"
    if plain.is_file():
        data = json.loads(_read(plain))
    elif packed.is_file():
        data = json.loads(gzip.decompress(packed.read_bytes()))
    else:
        raise BenchmarkError(f"no tasks file for domain {name!r} under {d}")
    return tuple(data)


def load_domain_tasks(name: str, split: str | None) -> list[dict[str, Any]]:
    """The domain's tasks in file order, restricted to a split of split_tasks.json (default `base`)."""
    domain_spec(name)  # validates the name and the installation
    splits = json.loads(_read(_data_dir() / name / "split_tasks.json"))
    split = split or "base"
    if split not in splits:
        raise BenchmarkError(f"option split={split!r}: domain {name} has splits {', '.join(sorted(splits))}")
    wanted = set(splits[split])
    return [t for t in _raw_tasks(name) if t["id"] in wanted]


def user_simulator_guidelines(with_tools: bool) -> str:
    name = "simulation_guidelines_tools.txt" if with_tools else "simulation_guidelines.txt"
    return _read(resources.files("inspect_evals.tau2") / "data" / "user_simulator" / name)
