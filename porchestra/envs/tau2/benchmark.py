"""Tau2Benchmark: task loading and options for τ²-bench (data from the pinned inspect-evals package).

Options: domain (telecom | retail | airline; default telecom), solo (default true for telecom, false
otherwise), split (a split of the domain's split_tasks.json; default `base`), ids (list or a file with
one id per line), limit, user_model / judge_model (model specs or Model objects for the user
simulator and the NL-assertion judge; their calls go through the Gateway given to
`Tau2Env.bind_gateway`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import Environment, Task
from ..benchmark import Benchmark, BenchmarkError, BenchmarkOptions
from .domains import DOMAINS, SOLO_DOMAINS, load_domain_tasks
from .env import Tau2Env

USER_SIM_INSTRUCTION = (
    "A customer of the {domain} company has contacted customer service and is waiting. Serve them "
    "according to the domain policy: talk to them only with the send_message_to_user tool (its result "
    "is the customer's reply), starting with a greeting, and use the domain tools to look up and change "
    "records. The conversation ends when the customer leaves; your end action's message is also sent "
    "to the customer.")


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
        return value.lower() in ("true", "1", "yes")
    raise BenchmarkError(f"option {name}={value!r} is not a boolean")


def read_ids(ids: Any) -> list[str] | None:
    if ids is None:
        return None
    if isinstance(ids, (str, Path)):
        p = Path(ids)
        if not p.is_file():
            raise BenchmarkError(f"option ids: file not found: {p}")
        return [line.strip() for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    if isinstance(ids, (list, tuple)):
        return [str(i) for i in ids]
    raise BenchmarkError(f"option ids must be a list or a file path, not {type(ids).__name__}")


class Tau2Options(BenchmarkOptions):
    domain: Any = None
    solo: Any = None
    split: Any = None
    subset: Any = None  # an alias of split


class Tau2Benchmark(Benchmark):
    name = "tau2"
    description = "τ²-bench customer-service domains (telecom solo; retail/airline with a user simulator)"
    Options = Tau2Options

    def _opts(self, options: dict[str, Any]) -> tuple[str, bool]:
        env_opts = options.get("env_options") or {}
        domain = options.get("domain") or env_opts.get("domain") or "telecom"
        if domain not in DOMAINS:
            raise BenchmarkError(f"option domain={domain!r}: choose one of {', '.join(DOMAINS)}")
        solo_opt = options.get("solo", env_opts.get("solo"))
        solo = (domain in SOLO_DOMAINS) if solo_opt is None else _bool(solo_opt, "solo")
        if solo and domain not in SOLO_DOMAINS:
            raise BenchmarkError(f"option solo=true: domain {domain} has no tickets; solo mode is telecom only")
        return domain, solo

    def load_tasks(self, options: dict[str, Any]) -> list[Task]:
        domain, solo = self._opts(options)
        raw = load_domain_tasks(domain, options.get("split") or options.get("subset"))
        ids = read_ids(options.get("ids"))
        if ids is not None:
            known = {t["id"] for t in raw}
            unknown = [i for i in ids if i not in known]
            if unknown:
                raise BenchmarkError(f"option ids: unknown task id(s) for {domain}: {', '.join(unknown[:5])}")
            wanted = set(ids)
            raw = [t for t in raw if t["id"] in wanted]
        limit = options.get("limit")
        if limit is not None:
            raw = raw[: int(limit)]
        return [self._task(t, domain, solo) for t in raw]

    def _task(self, raw: dict[str, Any], domain: str, solo: bool) -> Task:
        instruction = raw.get("ticket") if solo else USER_SIM_INSTRUCTION.format(domain=domain)
        if not instruction:
            raise BenchmarkError(f"task {raw['id']} has no ticket; run it with solo=false")
        purpose = (raw.get("description") or {}).get("purpose")
        return Task(id=raw["id"], instruction=instruction, category=domain,
                    metadata={"domain": domain, "solo": solo, "purpose": purpose},
                    payload={"task": raw})

    def make_env(self, task: Task, options: dict[str, Any]) -> Environment:
        domain, solo = self._opts({**options, "domain": task.metadata.get("domain", options.get("domain"))})
        return Tau2Env(domain=domain, solo=task.metadata.get("solo", solo),
                       user_model=options.get("user_model"), judge_model=options.get("judge_model"))
