"""The export / attribute / train verbs end to end on a tiny random model (seconds, CPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
typer = pytest.importorskip("typer")

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "train"))
from cli_helpers import prepare_work, rows as _rows, run  # noqa: E402


F = Path(__file__).parent / "fixtures" / "train"
FAST = ["--no-progress", "--threads", "1", "--batch-size", "2", "--chunk-size", "7"]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return prepare_work(tmp_path_factory.mktemp("train"))


def test_exports_and_attribution_files(work):
    recs = _rows(work / "rec.jsonl")
    assert len(recs) == 5 and recs[0]["format"] == "porchestra.decision.v1"
    sft = _rows(work / "sft.jsonl")
    assert len(sft) == 5 and all(r["messages"][-1]["role"] == "assistant" for r in sft)
    atts = _rows(work / "attr.jsonl")
    assert [a["needs_repair"] for a in atts] == [True, False, True]  # fail-delegate, fail-revise, ok-delegate
    assert (work / "attribution_events.jsonl").is_file()


@pytest.mark.parametrize("args,field", [
    (["export", "records", "/nonexistent/run", "--out", "{w}/x.jsonl"], "RUN_DIR"),
    (["export", "sft", str(F / "run_ok"), "--out", "{w}/x.jsonl", "--format", "alpaca"], "--format"),
    (["train", "sft", "{w}/sft.jsonl", "--model", "local:/nonexistent", "--out", "{w}/x"], "--model"),
    (["train", "opod", "{w}/rec.jsonl", "--model", "{w}/tiny", "--out", "{w}/x", "--divergence", "l2"], "--divergence"),
    (["train", "opod", "{w}/rec.jsonl", "--model", "{w}/tiny", "--out", "{w}/x"], "--attributions"),
    (["train", "rwr", "{w}/sft.jsonl", "--model", "{w}/tiny", "--out", "{w}/x"], "DATA"),
    (["train", "sft", "{w}/sft.jsonl", "--model", "{w}/tiny", "--out", "{w}/x", "--max-length", "16"], "--max-length"),
])
def test_bad_input_exits_2_naming_the_field_and_writes_nothing(work, args, field):
    out = run(*[a.format(w=work) for a in args], code=2)
    assert field in out
    assert not (work / "x.jsonl").exists() and not (work / "x").exists()


def test_sft_checkpoints_metrics_final_and_resume(work):
    out = work / "sft"
    run("train", "sft", work / "sft.jsonl", "--model", f"local:{work / 'tiny'}", "--out", out, "--max-steps", "2",
        "--save-every", "1", *FAST)
    rows = _rows(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    for key in ("loss", "n_rwr", "tokens_per_s", "peak_memory_mb", "lr", "step_time_s"):
        assert key in rows[0]
    assert {p.name for p in out.glob("checkpoint-*")} == {"checkpoint-1", "checkpoint-2"}
    assert (out / "checkpoint-2" / "adapter_config.json").is_file()
    assert (out / "final" / "config.json").is_file() and (out / "adapter" / "adapter_config.json").is_file()
    # resume: a longer run continues after step 2 instead of starting over
    run("train", "sft", work / "sft.jsonl", "--model", f"local:{work / 'tiny'}", "--out", out, "--max-steps", "4",
        *FAST)
    assert [r["step"] for r in _rows(out / "metrics.jsonl")] == [1, 2, 3, 4]
    # the outputs load as local: models (checkpoint and adapter)
    from porchestra.models.local_weights import resolve

    assert resolve(str(out / "final")).kind == "checkpoint" and resolve(str(out / "adapter")).kind == "adapter"
    run("train", "rwr", work / "rec.jsonl", "--model", work / "tiny", "--out", out, code=2)  # other method


def _weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "final" / "model.safetensors"))


def test_opod_with_lambda_zero_trains_exactly_like_rwr(work):
    common = ["--model", work / "tiny", "--max-steps", "2", "--full", "--lr", "1e-2", *FAST]
    run("train", "rwr", work / "rec.jsonl", "--out", work / "rwr", *common)
    run("train", "opod", work / "rec.jsonl", "--attributions", work / "attr.jsonl", "--lam", "0",
        "--out", work / "opod0", *common)
    a, b = _weights(work / "rwr"), _weights(work / "opod0")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    tiny = _weights(work.parent / work.name / "rwr")  # sanity: training changed something
    from safetensors.torch import load_file

    base = load_file(str(work / "tiny" / "model.safetensors"))
    assert any(not torch.equal(base[k], tiny[k]) for k in base if k in tiny)


@pytest.mark.parametrize("mode", [["--lora"], ["--full", "--divergence", "jsd"], ["--lora", "--bf16"]])
def test_opod_runs_with_both_terms(work, mode):
    out = work / f"opod{'_'.join(mode)}"
    run("train", "opod", work / "rec.jsonl", "--attributions", work / "attr.jsonl", "--model", work / "tiny",
        "--out", out, "--max-steps", "2", "--max-new-tokens", "6", *mode, *FAST)
    rows = _rows(out / "metrics.jsonl")
    assert sum(r["n_opd"] for r in rows) >= 1 and all(r["loss_opd"] >= 0 for r in rows)
    assert all(abs(r["loss"] - (r["loss_rwr"] + r["loss_opd"])) < 1e-4 for r in rows)


def test_dagrpo_scores_candidates_through_the_judge(work):
    judge = work / "judge.json"
    scores = [{"format": 10, "action_validity": 10, "tool_reasonableness": 10, "decision_quality": 10},
              {"format": 2, "action_validity": 0, "tool_reasonableness": 0, "decision_quality": 0}]
    judge.write_text(json.dumps([json.dumps(s) for s in scores] * 4))
    out = work / "grpo"
    run("train", "dagrpo", work / "sft.jsonl", "--judge", f"scripted:{judge}", "--model", work / "tiny",
        "--out", out, "--k", "2", "--max-steps", "1", "--max-new-tokens", "5", *FAST, code=2)  # SFT rows: no records
    run("train", "dagrpo", work / "rec.jsonl", "--judge", f"scripted:{judge}", "--model", work / "tiny",
        "--out", out, "--k", "2", "--max-steps", "1", "--max-new-tokens", "5", *FAST)
    row = _rows(out / "metrics.jsonl")[0]
    assert row["n_groups"] == 2 and row["reward_mean"] == pytest.approx((1.0 + 0.05) / 2)
    calls = [json.loads(x) for x in (out / "judge_events.jsonl").read_text().splitlines()]
    assert sum(c["event"] == "llm_call" and c["role"] == "judge" for c in calls) == 4


def test_dagrpo_judge_comes_from_the_configs_model_options(work, monkeypatch):
    """-c: judge_model and model_options.judge (endpoint, sampling) build the judge via get_model."""
    from porchestra.testing.fake_openai import FakeOpenAIServer

    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PORCHESTRA_JUDGE_BASE_URL", "PORCHESTRA_JUDGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    score = json.dumps({"format": 10, "action_validity": 10, "tool_reasonableness": 10, "decision_quality": 10})
    with FakeOpenAIServer(replies=lambda body: score) as srv:
        cfg = work / "judge_cfg.yaml"
        cfg.write_text(json.dumps({"judge_model": "openai:judge-from-config", "model_options": {"judge": {
            "base_url": srv.base_url, "temperature": 0.2, "max_tokens": 64, "seed": 3, "max_retries": 0}}}))
        run("train", "dagrpo", work / "rec.jsonl", "-c", cfg, "--model", work / "tiny", "--out", work / "grpo-cfg",
            "--k", "2", "--max-steps", "1", "--max-new-tokens", "5", *FAST)
        bodies = [r.body for r in srv.requests]
    assert len(bodies) == 4
    assert all((b["model"], b["temperature"], b["max_tokens"], b["seed"]) == ("judge-from-config", 0.2, 64, 3)
               for b in bodies)
    run("train", "dagrpo", work / "rec.jsonl", "--model", work / "tiny", "--out", work / "x", code=2)  # no judge


def test_sft_export_is_usable_by_trl_sft_trainer(work, tmp_path):
    """The documented prompt-completion format trains with TRL's SFTTrainer, prompt masked."""
    datasets = pytest.importorskip("datasets")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    run("export", "sft", F / "run_ok", "--out", tmp_path / "sft.jsonl")
    rows = [{k: v for k, v in r.items() if k != "metadata"} for r in _rows(tmp_path / "sft.jsonl")]
    tok = AutoTokenizer.from_pretrained(work / "tiny")
    trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(work / "tiny"),
                         args=SFTConfig(output_dir=str(tmp_path / "trl"), max_steps=1, use_cpu=True, bf16=False,
                                        report_to="none", save_strategy="no", per_device_train_batch_size=2),
                         train_dataset=datasets.Dataset.from_list(rows), processing_class=tok)
    ex = trainer.train_dataset[0]
    trained = [t for t in ex["labels"] if t != -100]
    reply = tok(rows[0]["completion"][0]["content"], add_special_tokens=False)["input_ids"]
    assert 0 < len(trained) < len(ex["input_ids"])  # the prompt is masked
    assert trained[:len(reply)] == reply  # what is trained is the decision (then the end of turn)
    assert trainer.train().training_loss > 0


def test_full_fine_tune_resumes_from_its_checkpoint(work):
    out = work / "sft_full"
    args = ["train", "sft", work / "sft.jsonl", "--model", work / "tiny", "--out", out, "--full", "--save-every", "1", *FAST]
    run(*args, "--max-steps", "1")
    assert (out / "checkpoint-1" / "model.safetensors").is_file() and (out / "checkpoint-1" / "optimizer.pt").is_file()
    run(*args, "--max-steps", "2")
    assert [r["step"] for r in _rows(out / "metrics.jsonl")] == [1, 2]
    assert not (out / "adapter").exists() and (out / "final" / "model.safetensors").is_file()
