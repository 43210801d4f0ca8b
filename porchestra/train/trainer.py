"""One small training loop for SFT, RWR, OPOD and DA-GRPO (accelerate for device placement).

Layout of OUT:
    metrics.jsonl            one line per optimizer step (loss terms, KL, tokens/s, peak memory, lr)
    checkpoint-<step>/       HF layout (adapter_model.safetensors + adapter_config.json for LoRA,
                             model.safetensors + config.json for full fine-tuning), tokenizer files,
                             optimizer.pt, scheduler.pt, rng.pt and trainer_state.json (written last)
    final/                   the trained policy as one standalone HF checkpoint (LoRA merged):
                             `local:OUT/final`, vLLM and transformers load it directly
    adapter/                 LoRA only: the adapter itself, its base_model_name_or_path pointing at
                             the on-disk base (when the base is a directory, not an in-memory merge)
    train_config.json        the settings of the run
A rerun with the same OUT resumes from the newest complete checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import torch
from pydantic import BaseModel

from .data import Encoder, Item, epoch_order
from .jsonl import dumps
from .malloc import apply_in_process
from .metrics import MetricsLog, peak_memory_mb
from .modelio import LoraSettings, Teacher, add_lora, is_peft, load_merged
from .objectives import Ctx

STATE = "trainer_state.json"


class TrainInputError(ValueError):
    """Training input that cannot be used (names the option); raised before OUT is written."""


class TrainSettings(BaseModel):
    method: str
    model: str = "local:smollm2"
    out: str
    lora: bool = True
    lora_cfg: LoraSettings = LoraSettings()
    lr: float = 1e-4
    weight_decay: float = 0.0
    warmup_steps: int = 0
    epochs: int = 1
    max_steps: int | None = None
    batch_size: int = 4
    max_length: int = 4096
    chunk_size: int = 512
    max_grad_norm: float = 1.0
    bf16: bool = False
    gradient_checkpointing: bool = False
    save_every: int = 50
    keep_checkpoints: int = 2
    seed: int = 0
    save_final: bool = True
    threads: int | None = None  # torch CPU threads; 1 is far faster on an oversubscribed machine


Objective = Callable[[Ctx, Teacher | None, list[Item]], tuple[torch.Tensor, dict[str, Any]]]


def latest_checkpoint(out: Path) -> Path | None:
    done = [p for p in out.glob("checkpoint-*") if (p / STATE).is_file()]
    return max(done, key=lambda p: int(p.name.split("-")[1])) if done else None


def run_training(cfg: TrainSettings, items: list[Item], objective: Objective, need_teacher: bool = False,
                 progress: bool = True, on_step: Callable[[int, dict[str, Any]], None] | None = None,
                 gen_tokens: int = 0) -> Path:
    """Train on `items` with `objective`; returns OUT. Resumes from OUT's newest checkpoint.
    Items whose sequences (with `gen_tokens` sampled tokens) exceed max_length are dropped and counted
    in OUT/train_config.json."""
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, get_linear_schedule_with_warmup

    apply_in_process()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    ckpt = latest_checkpoint(out) if out.is_dir() else None
    state = json.loads((ckpt / STATE).read_text()) if ckpt else {"step": 0}
    if ckpt and state.get("method") != cfg.method:
        raise TrainInputError(f"--out {out}: holds a {state.get('method')} run, not {cfg.method}")
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    # bf16 is applied by the objectives' own autocast (accelerate's state is process-global and would
    # pin the first run's precision for every later run in the same process)
    accel = Accelerator(cpu=not torch.cuda.is_available())

    model, tok, base_dir = load_merged(cfg.model)
    enc = Encoder(tok, cfg.max_length)
    n_in = len(items)
    items = [it for it in items if enc.fits(it, gen_tokens)]
    if not items:
        raise TrainInputError(f"--max-length {cfg.max_length}: all {n_in} decisions are longer")
    out.mkdir(parents=True, exist_ok=True)
    teacher = None
    if cfg.lora:
        model = add_lora(model, cfg.lora_cfg, resume_from=ckpt)
    elif ckpt is not None:
        if need_teacher:  # the frozen SFT weights must be copied before the student's are replaced
            teacher = Teacher(None, _frozen(model))
        model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
    if need_teacher and teacher is None:
        teacher = Teacher.frozen_from(model)
    if teacher is not None and teacher.student is None:
        teacher.student = model
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if cfg.lora:
            model.enable_input_require_grads()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    per_epoch = math.ceil(len(items) / cfg.batch_size)
    epochs = math.ceil(cfg.max_steps / per_epoch) if cfg.max_steps else cfg.epochs  # --max-steps wins
    batches = epoch_order(len(items), cfg.batch_size, epochs, cfg.seed)
    total = min(len(batches), cfg.max_steps) if cfg.max_steps else len(batches)
    sched = get_linear_schedule_with_warmup(opt, cfg.warmup_steps, max(total, 1))
    model, opt, sched = accel.prepare(model, opt, sched)
    if ckpt:
        opt.load_state_dict(torch.load(ckpt / "optimizer.pt", map_location=accel.device))
        sched.load_state_dict(torch.load(ckpt / "scheduler.pt"))
        torch.set_rng_state(torch.load(ckpt / "rng.pt"))
    if teacher is not None:
        teacher.student = accel.unwrap_model(model)
        teacher.to(accel.device)
    (out / "train_config.json").write_text(json.dumps(
        {**cfg.model_dump(mode="json"), "decisions": len(items), "dropped_too_long": n_in - len(items)}, indent=2))
    ctx = Ctx(accel.unwrap_model(model), enc, accel.device, cfg.chunk_size, cfg.bf16)

    metrics = MetricsLog(out / "metrics.jsonl", total, start=state["step"], enabled=progress)
    with metrics:
        for step in range(state["step"], total):
            t0 = time.perf_counter()
            batch = [items[i] for i in batches[step]]
            loss, m = objective(ctx, teacher, batch)
            accel.backward(loss)
            grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm) if cfg.max_grad_norm else None
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            dt = time.perf_counter() - t0
            tokens = sum(int(v) for k, v in m.items() if k.startswith("tokens_"))
            row = {"step": step + 1, "epoch": batches_epoch(step, len(items), cfg.batch_size),
                   "loss": float(loss.item()), **m, "lr": sched.get_last_lr()[0],
                   "grad_norm": None if grad_norm is None else float(grad_norm),
                   "step_time_s": round(dt, 3), "tokens_per_s": round(tokens / dt, 1) if dt > 0 else None,
                   "peak_memory_mb": peak_memory_mb(accel.device)}
            metrics.log(row)
            if on_step:
                on_step(step + 1, row)
            if (step + 1) % cfg.save_every == 0 or step + 1 == total:
                save_checkpoint(out, step + 1, cfg, accel.unwrap_model(model), tok, opt, sched)
    if cfg.save_final:
        save_final(out, accel.unwrap_model(model), tok, base_dir)
    return out


def batches_epoch(step: int, n: int, batch_size: int) -> int:
    return step // max(1, math.ceil(n / batch_size))


def _frozen(model: Any) -> Any:
    import copy

    f = copy.deepcopy(model)
    f.requires_grad_(False)
    return f.eval()


def save_checkpoint(out: Path, step: int, cfg: TrainSettings, model: Any, tok: Any, opt: Any, sched: Any) -> Path:
    """Write checkpoint-<step> through a temp dir and one rename; keep the newest `keep_checkpoints`."""
    dest = out / f"checkpoint-{step}"
    tmp = out / f".checkpoint-{step}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    torch.save(opt.state_dict(), tmp / "optimizer.pt")
    torch.save(sched.state_dict(), tmp / "scheduler.pt")
    torch.save(torch.get_rng_state(), tmp / "rng.pt")
    (tmp / STATE).write_text(dumps({"step": step, "method": cfg.method, "lora": cfg.lora}))
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    done = sorted((p for p in out.glob("checkpoint-*") if (p / STATE).is_file()),
                  key=lambda p: int(p.name.split("-")[1]))
    for old in done[:-max(1, cfg.keep_checkpoints)]:
        shutil.rmtree(old, ignore_errors=True)
    return dest


def save_final(out: Path, model: Any, tok: Any, base_dir: Path | None) -> Path:
    """OUT/final: standalone merged HF checkpoint; OUT/adapter: the LoRA adapter (LoRA runs)."""
    final = out / "final"
    tmp = out / ".final.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if is_peft(model):
        adapter_tmp = out / ".adapter.tmp"
        shutil.rmtree(adapter_tmp, ignore_errors=True)
        model.save_pretrained(adapter_tmp)
        if base_dir is not None:  # point the adapter at the real on-disk base
            p = adapter_tmp / "adapter_config.json"
            cfg = json.loads(p.read_text())
            cfg["base_model_name_or_path"] = str(base_dir)
            p.write_text(json.dumps(cfg, indent=2))
            tok.save_pretrained(adapter_tmp)
            shutil.rmtree(out / "adapter", ignore_errors=True)
            os.replace(adapter_tmp, out / "adapter")
        else:
            shutil.rmtree(adapter_tmp, ignore_errors=True)
        import copy

        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(tmp)
        del merged
    else:
        model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final
