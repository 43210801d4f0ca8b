"""The shipped miniature adapter: `local:porchestra-mini` resolves offline from the package, is the
testbed's default model, loads onto the embedded base and runs one real episode (no network)."""

from __future__ import annotations

import json

import pytest

from porchestra.config import RunConfig
from porchestra.models import local_weights as lw


def test_packaged_adapter_resolves_offline_and_names_a_portable_base():
    src = lw.resolve("porchestra-mini")
    assert src.kind == "adapter"
    cfg = json.loads((src.path / "adapter_config.json").read_text())
    assert cfg["base_model_name_or_path"] == "local:smollm2"  # not a path of the machine it was trained on
    size = sum(f.stat().st_size for f in src.path.iterdir())
    assert size < 15e6  # a LoRA adapter, a few MB, in the package data
    assert json.loads((src.path / "provenance.json").read_text())["step"] == "sft"


def test_testbed_defaults_to_the_trained_adapter_and_flags_win():
    assert RunConfig(env="testbed").orchestrator_model == "local:porchestra-mini"
    assert RunConfig(env="testbed").worker_model == "local:porchestra-mini"
    assert RunConfig(env="testbed", orchestrator_model="local:smollm2").orchestrator_model == "local:smollm2"
    assert RunConfig().orchestrator_model == "local:smollm2"  # other environments keep the embedded base


def test_adapter_runs_one_testbed_episode_offline(tmp_path):
    pytest.importorskip("peft")
    from porchestra.envs.testbed import TestbedEnv
    from porchestra.envs.testbed.world import make_task
    from porchestra.run import run_task

    task = make_task("heldout", 3)
    r = run_task(task, TestbedEnv(), RunConfig(env="testbed"), out_dir=tmp_path)
    ev = [json.loads(x) for x in r.events_path.read_text().splitlines()]
    calls = [e for e in ev if e["event"] == "llm_call"]
    assert calls and {e["model"] for e in calls} == {"local:porchestra-mini"}
    assert ev[-1]["event"] == "task_end" and r.reason
    # what training taught it (the base model never did this, docs/miniature.md): delegate with the
    # shop's cart tools and the discount code, and have the worker use them on the ordered items
    first = next(e for e in ev if e["event"] == "delegate")
    assert {"add_item", "apply_code", "cart_total"} <= set(first["harness"]["tools"])
    assert task.metadata["code"] in first["harness"]["context"]
    added = {e["args"].get("item") for e in ev if e["event"] == "tool_call" and e["tool"].startswith("add_item")}
    assert added & set(task.metadata["order"])
