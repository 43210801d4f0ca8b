"""Property 7 — bad input: malformed task files, configs, scenario files, model specs, CLI flags and
(for `view`/`report`) corrupt event logs end with exit code 2, a message that names the offending
field or value, and nothing written to the output directory. Runs the real CLI in-process (typer's
runner), one case per row of the case tables below.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Callable

from .result import PropertyResult

BENCH = "porchestra.reliability.world:VaultBenchmark"

# (name, files to create {name: text}, argv after the verb with {d} = the case dir and {out} = --out,
#  text the message must contain)
Case = tuple[str, dict[str, str], list[str], str]

RUN_CASES: list[Case] = [
    ("model spec without backend", {}, ["x", "--orchestrator-model", "bogus"], "orchestrator_model"),
    ("model spec without name", {}, ["x", "--worker-model", "openai:"], "missing the model name"),
    ("model spec unknown backend", {}, ["x", "--worker-model", "gpt4:mini"], "unknown backend 'gpt4'"),
    ("scripted model file missing", {}, ["x", "--orchestrator-model", "scripted:{d}/none.json"], "not found"),
    ("scripted model file not JSON", {"s.json": "[1,"}, ["x", "--worker-model", "scripted:{d}/s.json"],
     "not valid JSON"),
    ("scripted model file not a list", {"s.json": '{"a": 1}'}, ["x", "--worker-model", "scripted:{d}/s.json"],
     "JSON list"),
    ("replay log missing", {}, ["x", "--orchestrator-model", "replay:{d}/none.jsonl"], "not found"),
    ("zero worker steps", {}, ["x", "--worker-steps", "0"], "budgets.worker_steps"),
    ("negative global steps", {}, ["x", "--global-steps", "-1"], "budgets.global_steps"),
    ("negative cost cap", {}, ["x", "--max-cost", "-5"], "budgets.max_cost_usd"),
    ("zero workers", {}, ["x", "--max-workers", "0"], "budgets.max_workers"),
    ("unknown mode", {}, ["x", "--mode", "telepathy"], "telepathy"),
    ("config file missing", {}, ["x", "--config", "{d}/none.yaml"], "config file not found"),
    ("config not YAML", {"c.yaml": "budgets: [1,\n"}, ["x", "--config", "{d}/c.yaml"], "not valid YAML"),
    ("config not a mapping", {"c.yaml": "- 1\n- 2\n"}, ["x", "--config", "{d}/c.yaml"], "mapping"),
    ("config unknown field", {"c.yaml": "budgets:\n  global_stepz: 3\n"}, ["x", "--config", "{d}/c.yaml"],
     "global_stepz"),
    ("config unknown top-level key", {"c.yaml": "orchestrator: local:smollm2\n"}, ["x", "--config", "{d}/c.yaml"],
     "orchestrator"),
    ("config wrong type", {"c.yaml": "budgets:\n  max_workers: many\n"}, ["x", "--config", "{d}/c.yaml"],
     "budgets.max_workers"),
    ("config unknown role", {"c.yaml": "model_options:\n  judgee: {}\n"}, ["x", "--config", "{d}/c.yaml"], "judgee"),
    ("config bad model option", {"c.yaml": "model_options:\n  worker: {timeout_s: fast}\n"},
     ["x", "--config", "{d}/c.yaml"], "timeout_s"),
    ("config bad model spec", {"c.yaml": "worker_models:\n  cheap: nonsense\n"}, ["x", "--config", "{d}/c.yaml"],
     "nonsense"),
    ("config api_key_env unset",
     {"c.yaml": "model_options:\n  orchestrator: {api_key_env: PORCHESTRA_REL_UNSET_VAR}\n"},
     ["x", "--config", "{d}/c.yaml", "--orchestrator-model", "openai:m", "--base-url", "http://127.0.0.1:9/v1"],
     "PORCHESTRA_REL_UNSET_VAR"),
    ("config unknown ablation", {}, ["x", "--ablate", "everything"], "everything"),
    ("task text empty", {}, [""], "TASK"),
    ("task file missing", {}, ["@{d}/none.yaml"], "task file not found"),
    ("task file not YAML", {"t.yaml": "id: [\n"}, ["@{d}/t.yaml"], "not valid JSON/YAML"),
    ("task file wrong type", {"t.yaml": "id: t\ninstruction: [a, b]\n"}, ["@{d}/t.yaml"], "instruction"),
    ("task file missing field", {"t.yaml": "id: t\n"}, ["@{d}/t.yaml"], "instruction"),
    ("task file a list", {"t.json": '[{"id": "t", "instruction": "x"}]'}, ["@{d}/t.json"], "TASK"),
    ("unknown environment", {}, ["x", "--env", "no-such-bench"], "no-such-bench"),
    ("unknown task id", {}, ["nope", "--env", BENCH], "nope"),
    ("unisolated sandbox not allowed", {"c.yaml": "env_options: {isolation: none}\n"},
     ["x", "--config", "{d}/c.yaml"], "allow"),
    ("bad sandbox limits", {"c.yaml": "env_options: {limits: {wall_s: -1}}\n"}, ["x", "--config", "{d}/c.yaml"],
     "wall_s"),
    ("unknown flag", {}, ["x", "--no-such-flag"], "no-such-flag"),
    ("flag without value", {}, ["x", "--worker-steps"], "worker-steps"),
    ("non-numeric flag", {}, ["x", "--worker-steps", "many"], "--worker-steps"),
]

EVAL_CASES: list[Case] = [
    ("bad shard", {}, [BENCH, "--shard", "5/2"], "shard"),
    ("unparseable shard", {}, [BENCH, "--shard", "abc"], "shard"),
    ("unknown backend", {}, [BENCH, "--backend", "spark"], "spark"),
    ("unknown policy", {}, [BENCH, "--policy", "oracle"], "oracle"),
    ("ids file missing", {}, [BENCH, "--ids", "{d}/ids.json"], "ids"),
    ("no task selected", {}, [BENCH, "--ids", "vault-9999"], "no tasks selected"),
    ("zero limit", {}, [BENCH, "--limit", "0"], "limit"),
    ("unknown benchmark", {}, ["no_such_bench"], "no_such_bench"),
    ("benchmark module missing", {}, ["no_such_module:Bench"], "no_such_module"),
    ("general: task file missing", {"c.yaml": "env_options: {tasks: /nonexistent/tasks.jsonl}\n"},
     ["general", "--config", "{d}/c.yaml"], "tasks.jsonl"),
    ("general: malformed task file", {"t.jsonl": '{"id": "a", "instruction": "x"}\n{"id": 1,\n',
                                      "c.yaml": "env_options: {tasks: {d}/t.jsonl}\n"},
     ["general", "--config", "{d}/c.yaml"], "t.jsonl"),
    ("general: task of wrong type", {"t.json": '[{"id": "a", "instruction": 5}]',
                                     "c.yaml": "env_options: {tasks: {d}/t.json}\n"},
     ["general", "--config", "{d}/c.yaml"], "instruction"),
    ("gaia2: scenario file missing", {}, ["gaia2", "--scenarios", "{d}/none.json"], "none.json"),
    ("gaia2: malformed scenario file", {"s.json": '{"metadata": '}, ["gaia2", "--scenarios", "{d}/s.json"], "s.json"),
    ("bad model spec", {}, [BENCH, "--worker-model", "nonsense"], "worker_model"),
    ("bad config", {"c.yaml": "budgets: {worker_steps: 0}\n"}, [BENCH, "--config", "{d}/c.yaml"],
     "budgets.worker_steps"),
]


_HEAD = '"v": 1, "ts": "2026-01-01T00:00:00.000+00:00", "run_id": "r", "task_id": "t", "step": 0, "agent_id": "system"'
TORN_MIDDLE = '{' + _HEAD + ', "event": "task_start"}\n{"v": 1, "ev\n{' + _HEAD + ', "event": "task_end"}\n'
READ_CASES: list[tuple[str, Case]] = [
    ("view", ("event log with a corrupt middle line", {"r/events.jsonl": TORN_MIDDLE}, ["{d}/r"], "events.jsonl:2")),
    ("view", ("no event log", {}, ["{d}/nothing"], "no events.jsonl")),
    ("report", ("event log with a corrupt middle line", {"r/events.jsonl": TORN_MIDDLE}, ["{d}/r"], "events.jsonl:2")),
    ("report", ("no run directory", {}, ["{d}/nothing"], "nothing")),
]
OUT_FLAG = {"run": ["--out", "{out}"], "eval": ["--out", "{out}"], "report": ["--out", "{out}"],
            "view": ["--html", "{out}/view.html"]}


def _invoker() -> Callable[[list[str]], tuple[int, str]]:
    from typer.testing import CliRunner

    from .. import cli

    if not any(c.name == "eval" for c in cli.app.registered_commands):
        cli._register_subcommands()
    runner = CliRunner()

    def invoke(argv: list[str]) -> tuple[int, str]:
        r = runner.invoke(cli.app, argv, env={"COLUMNS": "300"})
        crash = r.exception is not None and r.exit_code not in (0, 2)
        return r.exit_code, (r.stdout or "") + (r.stderr or "") + (
            f"\n{type(r.exception).__name__}: {r.exception}" if crash else "")
    return invoke


def run_bad_input(workdir: str | Path | None = None) -> PropertyResult:
    res = PropertyResult(key="bad_input", title="Bad input")
    start = time.perf_counter()
    invoke = _invoker()
    exit2 = named = clean = 0
    cases = [("run", c) for c in RUN_CASES] + [("eval", c) for c in EVAL_CASES] + READ_CASES
    with tempfile.TemporaryDirectory(prefix="porchestra-rel-badinput-", dir=workdir) as tmp:
        for i, (verb, (name, files, argv, needle)) in enumerate(cases):
            d = Path(tmp) / f"case{i}"
            d.mkdir()
            for fname, text in files.items():
                (d / fname).parent.mkdir(parents=True, exist_ok=True)
                (d / fname).write_text(text.replace("{d}", str(d)))
            out = d / "out"
            args = [verb, *[a.replace("{d}", str(d)) for a in argv], *[a.replace("{out}", str(out))
                                                                        for a in OUT_FLAG[verb]]]
            code, text = invoke(args)
            flat = " ".join(text.split())
            ok_code, ok_msg, ok_out = code == 2, needle.replace("{d}", str(d)) in flat, not out.exists()
            exit2 += ok_code
            named += ok_msg
            clean += ok_out
            if not (ok_code and ok_msg and ok_out):
                res.fail(f"{verb} / {name}: exit {code}, message {'ok' if ok_msg else 'lacks ' + repr(needle)}, "
                         f"out dir {'untouched' if ok_out else 'WRITTEN'}: {flat[-240:]}")
        # an existing, non-empty --out is refused and left as it was
        d = Path(tmp) / "nonempty"
        (d / "out").mkdir(parents=True)
        (d / "out" / "keep.txt").write_text("mine")
        code, text = invoke(["run", "x", "--out", str(d / "out")])
        kept = [p.name for p in (d / "out").iterdir()] == ["keep.txt"]
        if code != 2 or "not empty" not in text or not kept:
            res.fail(f"run into a non-empty --out: exit {code}, kept={kept}: {text[-200:]}")
    n = len(cases)
    res.figures = {"cases": n + 1, "run_cases": len(RUN_CASES) + 1, "eval_cases": len(EVAL_CASES),
                   "view_and_report_cases": len(READ_CASES),
                   "exit_code_2": exit2 + (code == 2), "message_names_the_problem": named + ("not empty" in text),
                   "output_dir_untouched": clean + kept}
    res.seconds = round(time.perf_counter() - start, 1)
    return res


__all__ = ["EVAL_CASES", "RUN_CASES", "run_bad_input"]
