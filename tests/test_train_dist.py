"""Training under `accelerate launch` (2 CPU processes, gloo) and the server-side student sampler.

The distributed runs use the shipped DDP config (porchestra/train/accelerate_configs/ddp.yaml) on a
tiny random Llama; the sampler runs against porchestra's vLLM-compatible sample server, started here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("accelerate")
typer = pytest.importorskip("typer")

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "train"))
from cli_helpers import prepare_work, rows as _rows, run  # noqa: E402


F = Path(__file__).parent / "fixtures" / "train"
DDP = Path(__file__).parents[1] / "porchestra" / "train" / "accelerate_configs" / "ddp.yaml"
FAST = ["--no-progress", "--threads", "1", "--chunk-size", "7"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(n: int, *args, timeout: int = 240) -> None:
    """`porchestra train ARGS` in this process (n = 1) or under accelerate launch with n ranks."""
    if n == 1:
        run("train", *args)
        return
    train = ["-m", "porchestra", "train", *map(str, args)]
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(DDP), "--num_processes", str(n),
        "--main_process_port", str(_port()), *train]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return prepare_work(tmp_path_factory.mktemp("dist"))


def _weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path))


def _same_run(a: Path, b: Path, weights: str = "final/model.safetensors", keys=("loss",)) -> None:
    ra, rb = _rows(a / "metrics.jsonl"), _rows(b / "metrics.jsonl")
    assert [r["step"] for r in ra] == [r["step"] for r in rb]
    for x, y in zip(ra, rb):
        for k in (*keys, "grad_norm"):
            assert x[k] == pytest.approx(y[k], rel=1e-5, abs=1e-6), (k, x, y)
        assert all(x[k] == y[k] for k in x if k.startswith(("n_", "tokens_")) and k != "tokens_per_s")
    wa, wb = _weights(a / weights), _weights(b / weights)
    assert wa.keys() == wb.keys()
    # Adam divides by sqrt(v): a gradient entry near 0 turns float reduction-order noise (1e-9) into a
    # few 1e-6 of weight change; a wrong reduction moves weights by ~lr (1e-2)
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=2e-5, msg=k)


def test_two_cpu_ranks_give_the_one_process_loss_and_weights(work):
    """DDP over 2 processes on one global batch of 5 (3 + 2 decisions per rank) = 1 process on it."""
    common = ["sft", work / "sft.jsonl", "--model", work / "tiny", "--full", "--lr", "1e-2", "--max-steps", "1",
              "--batch-size", "5", *FAST]
    launch(1, *common, "--out", work / "one")
    launch(2, *common, "--out", work / "two")
    _same_run(work / "one", work / "two")
    cfg = json.loads((work / "two" / "train_config.json").read_text())
    assert cfg["world_size"] == 2 and cfg["distributed_type"] == "MULTI_CPU"
    base = _weights(work / "tiny" / "model.safetensors")
    moved = _weights(work / "two" / "final" / "model.safetensors")
    assert any(not torch.equal(base[k], moved[k]) for k in base)  # the step did change the weights


@pytest.mark.slow
def test_opod_with_lora_on_two_ranks_equals_one_process(work):
    """Both OPOD terms, uneven shards (global batch 3 → 2 + 1; some ranks hold no hinted decision),
    samples seeded per decision so they do not depend on the rank split."""
    common = ["opod", work / "rec.jsonl", "--attributions", work / "attr.jsonl", "--model", work / "tiny",
              "--lr", "1e-2", "--max-steps", "2", "--batch-size", "3", "--max-new-tokens", "6",
              "--sample-seed", "decision", *FAST]
    launch(1, *common, "--out", work / "opod1")
    launch(2, *common, "--out", work / "opod2")
    _same_run(work / "opod1", work / "opod2", "adapter/adapter_model.safetensors", ("loss", "loss_rwr", "loss_opd"))
    assert sum(r["n_opd"] for r in _rows(work / "opod2" / "metrics.jsonl")) >= 2


@pytest.mark.slow
def test_resume_under_accelerate_launch_continues_the_same_run(work):
    """2 ranks, killed after step 1 of 2 (simulated: step 2's outputs removed), rerun = 1 process doing
    the 2 steps without stopping (optimizer, scheduler and per-rank RNG restored from checkpoint-1)."""
    import shutil

    common = ["sft", work / "sft.jsonl", "--model", work / "tiny", "--full", "--lr", "1e-2", "--batch-size", "4",
              "--save-every", "1", "--max-steps", "2", *FAST]
    launch(1, *common, "--out", work / "straight")
    out = work / "resumed"
    launch(2, *common, "--out", out)
    assert (out / "checkpoint-1" / "optimizer.pt").is_file() and (out / "checkpoint-1" / "rng-ranks.pt").is_file()
    shutil.rmtree(out / "checkpoint-2")
    shutil.rmtree(out / "final")
    (out / "metrics.jsonl").write_text((out / "metrics.jsonl").read_text().splitlines(keepends=True)[0])
    launch(2, *common, "--out", out)
    _same_run(work / "straight", out)


@pytest.mark.slow
def test_dagrpo_with_an_idle_rank_equals_one_process(work):
    """Global batch 1 on 2 ranks: rank 1 has no group and runs the weight-0 dummy forward; the
    update, the loss and the reported reward are those of one process."""
    judge = work / "judge_dist.json"
    scores = [{"format": 10, "action_validity": 10, "tool_reasonableness": 10, "decision_quality": 10},
              {"format": 2, "action_validity": 0, "tool_reasonableness": 0, "decision_quality": 0}]
    judge.write_text(json.dumps([json.dumps(x) for x in scores] * 4))
    common = ["dagrpo", work / "rec.jsonl", "--judge", f"scripted:{judge}", "--model", work / "tiny", "--k", "2",
              "--max-steps", "1", "--batch-size", "1", "--max-new-tokens", "5", "--lr", "1e-2",
              "--sample-seed", "decision", *FAST]
    launch(1, *common, "--out", work / "grpo1")
    launch(2, *common, "--out", work / "grpo2")
    _same_run(work / "grpo1", work / "grpo2", "adapter/adapter_model.safetensors", ("loss", "reward_mean"))
    assert (work / "grpo2" / "judge_events.rank1.jsonl").is_file()


# --- the server-side sampler -------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(work):
    """One server for the module (start-up costs seconds); the --lora case runs first, on the base."""
    import httpx

    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "porchestra.train.sample_server", "--model", str(work / "tiny"),
                             "--port", str(port), "--threads", "1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                pytest.fail("sample server exited at start-up")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _state(url: str) -> dict:
    import httpx

    return httpx.get(url + "/v1/porchestra/state", timeout=10).json()


@pytest.mark.parametrize("mode", ["--lora", "--full"])
def test_server_sampler_gets_the_weights_at_the_cadence_and_its_token_ids_are_scored(work, server, mode):
    """sampler_logprob_gap compares the server's log-probs of the tokens it sampled with the trainer's
    log-probs of the tokens the loss scored: ~0 right after a sync (same weights, same ids), clearly
    not 0 a step later (the trainer moved, the server did not)."""
    out = work / f"server{mode}"
    before = len(_state(server)["loads"])
    run("train", "opod", work / "rec.jsonl", "--attributions", work / "attr.jsonl", "--model", work / "tiny",
        "--out", out, "--max-steps", "3", "--batch-size", "4", "--lr", "5e-2", "--max-new-tokens", "6", mode,
        "--sampler", "server", "--sampler-url", server + "/v1", "--sync-every", "2", *FAST)
    rows = _rows(out / "metrics.jsonl")
    assert all(r["n_opd"] == 2 for r in rows)
    gaps = [r["sampler_logprob_gap"] for r in rows]
    assert gaps[0] < 1e-4 and gaps[2] < 1e-4  # steps 1 and 3 sample from weights synced at steps 0 and 2
    assert gaps[1] > 1e-3  # step 2 samples from the step-0 weights
    loads = _state(server)["loads"][before:]
    kind = "lora" if mode == "--lora" else "weights"
    assert [(x["kind"], Path(x["path"]).name) for x in loads] == [(kind, "student-step0"), (kind, "student-step2")]


def test_server_sampler_reads_vllm_token_id_strings_and_refuses_text_only_replies():
    from porchestra.train.sampler import ServerSampler

    s = ServerSampler._parse({"index": 0, "finish_reason": "stop", "text": "ab",
                              "logprobs": {"tokens": ["token_id:7", "token_id:3"], "token_logprobs": [-1.0, -0.5]}},
                             eos=3)
    assert s.tokens == [7, 3] and s.logprobs == [-1.0, -0.5]
    s = ServerSampler._parse({"index": 0, "finish_reason": "stop", "token_ids": [7, 8]}, eos=3)
    assert s.tokens == [7, 8, 3]  # a server that drops the stop token: the end of turn is still scored
    with pytest.raises(RuntimeError, match="token ids"):
        ServerSampler._parse({"index": 0, "finish_reason": "length", "text": "ab"}, eos=3)


def test_opd_only_option_drops_the_rwr_term(work):
    out = work / "opd_only"
    run("train", "opod", work / "rec.jsonl", "--attributions", work / "attr.jsonl", "--model", work / "tiny",
        "--out", out, "--max-steps", "1", "--batch-size", "4", "--max-new-tokens", "6", "--rwr-weight", "0", *FAST)
    row = _rows(out / "metrics.jsonl")[0]
    assert row["n_rwr"] == 0 and row["loss_rwr"] == 0 and row["n_opd"] == 2
    assert row["loss"] == pytest.approx(row["loss_opd"])


@pytest.mark.parametrize("args,field", [
    (["--sampler", "vllm-magic"], "--sampler"),
    (["--sampler", "server"], "--sampler-url"),
    (["--sample-seed", "sometimes"], "--sample-seed"),
    (["--rwr-weight", "0", "--lam", "0"], "--rwr-weight"),
])
def test_bad_sampler_options_exit_2_and_write_nothing(work, args, field):
    out = run("train", "opod", work / "rec.jsonl", "--attributions", work / "attr.jsonl", "--model", work / "tiny",
              "--out", work / "bad", *args, code=2)
    assert field in out and not (work / "bad").exists()


def test_shipped_accelerate_configs_are_found():
    out = run("train", "accelerate-config", "ddp")
    assert Path(out.strip()).is_file()
    assert "fsdp2" in run("train", "accelerate-config", "nope", code=2)
