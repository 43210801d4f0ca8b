"""Benchmark (not a test): time and peak memory of one OPOD step vs an SFT step on the same decisions,
and vs TRL's SDFTTrainer doing equivalent work (on-policy samples at the same contexts, base-weights
teacher seeing the hint, full-vocabulary reverse KL, LoRA).

    python benchmarks/bench_opod.py [--model local:smollm2] [--decisions 4] [--new-tokens 64] [--steps 3]
    python benchmarks/bench_opod.py --ranks 2      # the real CLI on 2 DDP ranks (accelerate launch)

Each variant runs in a fresh subprocess (clean peak memory: peak RSS of the process on CPU, model
loading included; torch's allocator peak on GPU) for `--steps` steps after one warm-up step; the
median step time is reported. `--malloc` applies the CPU malloc settings to the children. Decisions are
the fixture trajectories' delegation contexts (tests/fixtures/train), each with a hint.

Variants
    sft        likelihood of the stored decisions (porchestra SFT step)
    opod       porchestra OPOD step: RWR on the stored decisions + OPD (sample, teacher, chunked KL)
    opd        porchestra OPD term alone (what TRL's trainer does)
    sft_full, opod_full   the same with full fine-tuning (teacher = a frozen copy of the weights)
    trl_sdft   trl.experimental.sdft.SDFTTrainer, distillation_mode=full_logits, alpha=1 (reverse KL),
               teacher_model_kind=base, num_generations=1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MALLOC = {"MALLOC_MMAP_THRESHOLD_": "4294967296", "MALLOC_TRIM_THRESHOLD_": "68719476736",
          "MALLOC_TOP_PAD_": "1073741824"}
HINT = "The worker needs execute_python: include it in the delegated tools."


def _items(n: int):
    sys.path.insert(0, str(ROOT))
    from porchestra.train.data import Item
    from porchestra.train.records import collect_records

    recs = [r for r in collect_records([ROOT / "tests" / "fixtures" / "train"]) if r.valid]
    recs = (recs * (n // len(recs) + 1))[:n]
    return [Item(r.decision_id, r.messages, r.decision, 1.0, HINT, r.hint_slot) for r in recs]


def _peak(device) -> float:
    from porchestra.train.metrics import peak_memory_mb

    return peak_memory_mb(device)


def run_ours(args) -> dict:
    import torch

    from porchestra.train.data import Encoder
    from porchestra.train.modelio import LoraSettings, Teacher, add_lora, load_merged
    from porchestra.train.objectives import Ctx, GenSettings, OPODSettings, likelihood_loss, opod_loss

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, tok, _ = load_merged(args.model)
    full = args.variant.endswith("_full")  # full fine-tuning: the teacher is a frozen copy
    model = (model if full else add_lora(model, LoraSettings(r=16))).to(device)
    model.train()
    teacher = Teacher.frozen_from(model).to(device)
    ctx = Ctx(model, Encoder(tok), device, args.chunk, args.bf16)
    items = _items(args.decisions)
    if args.variant.startswith("opd"):
        for it in items:
            it.weight = 0.0
    cfg = OPODSettings(lam=1.0, gen=GenSettings(max_new_tokens=args.new_tokens))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    times, toks = [], 0
    for step in range(args.steps + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        if args.variant.startswith("sft"):
            loss, m = likelihood_loss(ctx, items)
        else:
            loss, m = opod_loss(ctx, teacher, items, cfg)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step:  # the first step warms up
            times.append(time.perf_counter() - t0)
            toks += m.get("tokens_opd", 0) + m.get("tokens_rwr", 0)
    return {"variant": args.variant, "step_s": statistics.median(times), "peak_mb": _peak(device),
            "tokens_per_step": toks / max(1, len(times)), "device": device.type}


def run_trl(args) -> dict:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl.experimental.sdft import SDFTConfig, SDFTTrainer

    from porchestra.train.modelio import load_merged, resolve_base_dir

    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers import AutoTokenizer

    base_dir = resolve_base_dir(args.model)
    if (base_dir / "adapter_config.json").is_file():  # an adapter: TRL gets the merged weights
        model, tok, _ = load_merged(args.model)
    else:
        model, tok = None, AutoTokenizer.from_pretrained(base_dir)
    items = _items(args.decisions)
    ds = Dataset.from_list([{"prompt": it.messages, "privileged_context": it.hint} for it in items])
    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, a, s, c, **kw):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.t0 = time.perf_counter()

        def on_step_end(self, a, s, c, **kw):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.t0)

    cfg = SDFTConfig(output_dir=str(Path(args.tmp) / "trl"), per_device_train_batch_size=len(items),
                     num_generations=1, max_completion_length=args.new_tokens, max_prompt_length=4096,
                     distillation_mode="full_logits", distillation_alpha=1.0, teacher_model_kind="base",
                     max_steps=args.steps + 1, learning_rate=1e-5, logging_steps=1, report_to="none",
                     save_strategy="no", use_cpu=not torch.cuda.is_available(), bf16=args.bf16,
                     gradient_checkpointing=False, shuffle_dataset=False, disable_dropout=True)
    model = model or AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    trainer = SDFTTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok,
                          peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"), callbacks=[Timer()])
    trainer.train()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return {"variant": "trl_sdft", "step_s": statistics.median(times[1:] or times), "peak_mb": _peak(device),
            "device": device.type}


def run_ranks(args) -> None:
    """The real CLI under accelerate launch (shipped DDP config, N ranks): one step of `train opod` with
    λ = 0 (the likelihood step) and λ = 1 on the same `--decisions` decisions (fixture delegation
    contexts, each successful and each with a hint; one global batch). Reports the largest rank's peak
    memory and the step time."""
    sys.path.insert(0, str(ROOT))
    from porchestra.train.records import collect_records

    tmp = Path(args.tmp) / f"ranks{args.ranks}"
    tmp.mkdir(parents=True, exist_ok=True)
    recs = [r for r in collect_records([ROOT / "tests" / "fixtures" / "train"]) if r.valid and r.messages]
    rec_lines, att_lines = [], []
    for i in range(args.decisions):
        r = recs[i % len(recs)].model_copy(update={"decision_id": f"bench:{i}", "success": True, "reward": 1.0})
        rec_lines.append(r.model_dump_json())
        att_lines.append(json.dumps({"decision_id": r.decision_id, "decision_type": r.decision_type,
                                     "needs_repair": True, "hint": HINT, "status": "ok", "model": "bench",
                                     "cache_key": str(i)}))
    (tmp / "rec.jsonl").write_text("\n".join(rec_lines) + "\n")
    (tmp / "attr.jsonl").write_text("\n".join(att_lines) + "\n")
    ddp = ROOT / "porchestra" / "train" / "accelerate_configs" / "ddp.yaml"
    rows = {}
    for lam in ("0", "1"):
        out = tmp / f"lam{lam}"
        subprocess.run(["rm", "-rf", str(out)], check=True)
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ddp), "--num_processes",
               str(args.ranks), "--main_process_port", "29531", "-m", "porchestra", "train", "opod", tmp / "rec.jsonl",
               "--attributions", tmp / "attr.jsonl", "--model", args.model, "--out", out, "--max-steps", "1",
               "--batch-size", str(args.decisions), "--max-new-tokens", str(args.new_tokens), "--lam", lam, "--no-progress",
               "--chunk-size", str(args.chunk)] + (["--threads", str(args.threads)] if args.threads else []) + \
              (["--bf16"] if args.bf16 else [])
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=ROOT)
        if proc.returncode:
            print(f"lam {lam}: failed\n{proc.stderr[-3000:]}")
            return
        rows[lam] = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
        r = rows[lam]
        print(f"{args.ranks} ranks, lam {lam}: step {r['step_time_s']:.2f} s   peak (largest rank) "
              f"{r['peak_memory_mb']:.0f} MB   n_rwr {r['n_rwr']} n_opd {r['n_opd']}")
    a, b = rows["1"], rows["0"]
    print(f"ratio opod/likelihood step under DDP: time {a['step_time_s'] / b['step_time_s']:.2f}x  "
          f"memory {a['peak_memory_mb'] / b['peak_memory_mb']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="local:smollm2")
    ap.add_argument("--decisions", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--variants", default="sft,opod,opd,trl_sdft")
    ap.add_argument("--malloc", action="store_true", help="children run with the CPU malloc settings (faster "
                    "steps, but freed memory is kept, so peak RSS overstates the live peak)")
    ap.add_argument("--ranks", type=int, default=0, help="instead: the real CLI under accelerate launch with this "
                    "many DDP ranks, OPOD vs likelihood step (largest rank's peak memory)")
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", default="/tmp/porchestra-bench")
    args = ap.parse_args()
    if args.ranks:
        run_ranks(args)
        return
    if args.variant:  # child process
        res = run_trl(args) if args.variant == "trl_sdft" else run_ours(args)
        print("RESULT " + json.dumps(res))
        return
    results = {}
    for v in args.variants.split(","):
        cmd = [sys.executable, __file__, "--variant", v, "--model", args.model, "--decisions", str(args.decisions),
               "--new-tokens", str(args.new_tokens), "--steps", str(args.steps), "--chunk", str(args.chunk),
               "--tmp", args.tmp] + (["--threads", str(args.threads)] if args.threads else []) + \
              (["--bf16"] if args.bf16 else [])
        env = {**os.environ, **(MALLOC if args.malloc else {})}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{v}: failed\n{proc.stderr[-2000:]}")
            continue
        results[v] = json.loads(line[7:])
        r = results[v]
        print(f"{v:9s} step {r['step_s']:.3f} s   peak {r['peak_mb']:.0f} MB   ({r['device']})")
    for v, r in results.items():
        base = results.get("sft_full" if v.endswith("_full") else "sft")
        if base and not v.startswith("sft"):
            name = "sft_full" if v.endswith("_full") else "sft"
            print(f"ratio {v}/{name}: time {r['step_s'] / base['step_s']:.2f}x  "
                  f"memory {r['peak_mb'] / base['peak_mb']:.2f}x")
    if "opd" in results and "trl_sdft" in results:
        a, b = results["opd"], results["trl_sdft"]
        print(f"ratio opd/trl_sdft: time {a['step_s'] / b['step_s']:.2f}x  memory {a['peak_mb'] / b['peak_mb']:.2f}x")


if __name__ == "__main__":
    main()
