"""Worker conversations as one supervised sequence, and the rule-based attributor, on real testbed
runs of the scripted expert (the real loop, the real environment)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "train"))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402

from porchestra.config import RunConfig  # noqa: E402
from porchestra.envs.testbed.env import TestbedEnv  # noqa: E402
from porchestra.envs.testbed.expert import expert_replies  # noqa: E402
from porchestra.envs.testbed.world import make_task  # noqa: E402
from porchestra.models.scripted import ScriptedModel  # noqa: E402
from porchestra.run import Models, run_task  # noqa: E402
from porchestra.train.attribution_rules import RULES_MODEL, rule_attributions  # noqa: E402
from porchestra.train.conversations import worker_conversations  # noqa: E402
from porchestra.train.data import Encoder, Item  # noqa: E402
from porchestra.train.datasets import sft_example_item  # noqa: E402
from porchestra.train.losses import IGNORE  # noqa: E402
from porchestra.train.objectives import Ctx, labeled_logprob, likelihood_loss, sequence_logprob  # noqa: E402
from porchestra.train.data import pad_labeled  # noqa: E402


def _run(tmp: Path, seed: int, orch: list[str] | None = None, work: list[str] | None = None) -> Path:
    task = make_task("train", seed)
    o, w = expert_replies(task)
    models = Models(ScriptedModel(orch or o, name="scripted:o"), {"default": ScriptedModel(work or w, name="scripted:w")})
    out = tmp / task.id
    run_task(task, TestbedEnv(), RunConfig(orchestrator_model="scripted:o", worker_model="scripted:w"),
             out_dir=out, models=models, run_id=f"t-{task.id}")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("expert")
    for seed in range(3):  # none, revoke, scope
        _run(d, seed)
    return d


def test_one_conversation_per_worker_with_every_turn(runs):
    rows = list(worker_conversations([runs]))
    assert len(rows) == 3
    for row in rows:
        events = [json.loads(x) for x in (runs / row["metadata"]["decision_id"].split(":")[1] / "events.jsonl")
                  .read_text().splitlines()]
        calls = [e for e in events if e["event"] == "llm_call" and e["role"] == "worker"]
        assert row["metadata"]["turns"] == len(calls)
        assistant = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        assert assistant == [c["response"] for c in calls]  # the replies, in order, verbatim
        assert row["metadata"]["all_turns"] is True


def test_conversation_labels_exactly_the_assistant_turns(runs):
    tok = tiny_tokenizer()
    enc = Encoder(tok, 100_000)
    row = next(r for r in worker_conversations([runs]) if r["metadata"]["turns"] > 5)
    item = sft_example_item(row, "x")
    assert item.conversation
    ids, labels = enc.supervised(item)
    sup = [t for t, lab in zip(ids, labels) if lab != IGNORE]
    replies = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
    assert sup.count(enc.eos_id) == len(replies)  # each turn's end-of-turn token is a target too
    assert tok.decode([t for t in sup if t != enc.eos_id]) == "".join(replies)
    prompt_only = [t for t, lab in zip(ids, labels) if lab == IGNORE]
    assert prompt_only and len(sup) + len(prompt_only) == len(ids)


def test_conversation_likelihood_equals_the_sum_over_its_turns(runs):
    """One forward over the conversation gives the same summed log-likelihood as one example per
    turn (what training it turn by turn would see), up to float error."""
    tok = tiny_tokenizer()
    model = tiny_model(len(tok))
    model.config.max_position_embeddings = 8192
    ctx = Ctx(model, Encoder(tok, 100_000), torch.device("cpu"), chunk=64)
    row = next(r for r in worker_conversations([runs]) if r["metadata"]["turns"] > 5)
    # keep it short for the tiny model's positions: the first three turns
    msgs, n = [], 0
    for m in row["messages"]:
        msgs.append(m)
        n += m["role"] == "assistant"
        if n == 3:
            break
    conv = Item("c", msgs, "", 1.0, conversation=True)
    with torch.no_grad():
        mean_c, cnt_c = labeled_logprob(ctx, pad_labeled([ctx.enc.supervised(conv)], ctx.enc.pad_id))
        pairs = [(ctx.enc.prompt(msgs[:i]), ctx.enc.reply(m["content"])) for i, m in enumerate(msgs)
                 if m["role"] == "assistant"]
        mean_t, cnt_t = sequence_logprob(ctx, pairs)
    total_c = float(mean_c[0] * cnt_c[0])
    total_t = float((mean_t * cnt_t).sum())
    assert int(cnt_c[0]) == int(cnt_t.sum())
    assert total_c == pytest.approx(total_t, rel=1e-4, abs=1e-3)
    loss, metrics = likelihood_loss(ctx, [conv])
    assert metrics["tokens_rwr"] == int(cnt_t.sum()) and loss.item() > 0


def test_rules_flag_a_delegation_that_forced_a_tool_request(runs):
    atts = {a.decision_id.split(":")[1]: a for a in rule_attributions([runs], runs / "att.jsonl")
            if a.decision_type == "delegate"}
    assert all(a.model == RULES_MODEL for a in atts.values())
    assert not atts["testbed-train-0"].needs_repair  # dynamics none: the harness fitted
    revoke = atts["testbed-train-1"]
    assert revoke.needs_repair and "add_item_v2" in revoke.hint
    assert (runs / "att.jsonl").is_file()


def test_rules_flag_a_revision_that_did_not_grant_the_requested_tool(tmp_path):
    task = make_task("train", 1)  # revoke
    orch, work = expert_replies(task)
    bad = json.loads(orch[1])
    bad["params"]["tools"] = ["add_item", "apply_code", "cart_total"]  # ignores the request
    orch = [orch[0], json.dumps(bad), *orch[1:]]
    out = _run(tmp_path, 1, orch=orch, work=work)
    revs = [a for a in rule_attributions([out], tmp_path / "a.jsonl") if a.decision_type == "revise"]
    assert revs and revs[0].needs_repair and "add_item_v2" in revs[0].hint
    good = _run(tmp_path / "good", 1)
    assert not [a for a in rule_attributions([good], tmp_path / "b.jsonl")
                if a.decision_type == "revise" and a.needs_repair]


def test_rules_flag_ending_the_task_while_a_worker_waits_on_its_request(tmp_path):
    task = make_task("train", 1)  # revoke: the worker asks for add_item_v2
    orch, work = expert_replies(task)
    ended = json.dumps({"action": "complete", "reasoning": "done", "params": {"answer": "12"}})
    out = _run(tmp_path, 1, orch=[orch[0], ended], work=work)
    atts = rule_attributions([out], tmp_path / "a.jsonl")
    end = [a for a in atts if a.decision_type == "end"]
    assert len(end) == 1 and end[0].needs_repair
    assert "revise_task" in end[0].hint and "add_item_v2" in end[0].hint
    # an end that answers a finish report is not a target at all
    good = _run(tmp_path / "good", 1)
    assert not [a for a in rule_attributions([good], tmp_path / "b.jsonl") if a.decision_type == "end"]
