"""One training loop for SFT, RWR, OPOD and DA-GRPO on accelerate: one process, or `accelerate launch`
with DDP, FSDP2 or DeepSpeed ZeRO (configs in porchestra/train/accelerate_configs/, docs/training.md).

Each optimizer step takes one global minibatch (--batch-size decisions, the same order on every
rank); rank r trains on decisions r, r+W, r+2W, ... of it, and the objectives' global means make the
update equal to the one-process update on the whole minibatch (dist.py). Rank 0 writes OUT.

Layout of OUT:
    metrics.jsonl            one line per optimizer step (loss terms, KL, tokens/s, peak memory, lr)
    checkpoint-<step>/       HF layout (adapter_model.safetensors + adapter_config.json for LoRA,
                             model.safetensors + config.json for full fine-tuning), tokenizer files,
                             optimizer/scheduler/RNG state and trainer_state.json (written last;
                             see checkpoint.py)
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
import random
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

import torch
from pydantic import BaseModel

from .checkpoint import STATE, is_sharded, latest_checkpoint, load_training_state, save_checkpoint, save_final
from .data import Encoder, Item, epoch_order
from .dist import AccelParallel, LossForward
from .malloc import apply_in_process
from .metrics import MetricsLog, gather_row, peak_memory_mb
from .modelio import LoraSettings, Teacher, add_lora, body_and_head, load_merged
from .objectives import Ctx

__all__ = ["STATE", "TrainInputError", "TrainSettings", "latest_checkpoint", "run_training"]



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
    sample_seed: str = "batch"  # "decision": each decision sampled from hash(seed, step, decision id)


Objective = Callable[[Ctx, Teacher | None, list[Item]], tuple[torch.Tensor, dict[str, Any]]]


def run_training(cfg: TrainSettings, items: list[Item], objective: Objective, need_teacher: bool = False,
                 progress: bool = True, on_step: Callable[[int, dict[str, Any]], None] | None = None,
                 gen_tokens: int = 0, sampler: Any = None) -> Path:
    """Train on `items` with `objective`; returns OUT. Resumes from OUT's newest checkpoint.
    Items whose sequences (with `gen_tokens` sampled tokens) exceed max_length are dropped and counted
    in OUT/train_config.json. `sampler`: where student samples come from (sampler.py; default in-process)."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs
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
    torch.manual_seed(cfg.seed)  # the same on every rank: identical LoRA initialisation
    # bf16 is applied by the objectives' own autocast (accelerate's state is process-global and would
    # pin the first run's precision for every later run in the same process). Buffers (rotary tables)
    # are constants: broadcasting them would make every forward a collective. The scheduler is stepped
    # once per global step (accelerate would step it once per rank, assuming a sharded dataloader).
    accel = Accelerator(cpu=not torch.cuda.is_available(), step_scheduler_with_optimizer=False,
                        kwargs_handlers=[DistributedDataParallelKwargs(broadcast_buffers=False)])
    _check_engine(accel)
    main, world, rank = accel.is_main_process, accel.num_processes, accel.process_index
    sharded = is_sharded(accel)

    model, tok, base_dir = load_merged(cfg.model)
    enc = Encoder(tok, cfg.max_length)
    n_in = len(items)
    items = [it for it in items if enc.fits(it, gen_tokens)]
    if not items:
        raise TrainInputError(f"--max-length {cfg.max_length}: all {n_in} decisions are longer")
    if main:
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
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if cfg.lora:
            model.enable_input_require_grads()
    model.train()
    net = LossForward(model)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    per_epoch = math.ceil(len(items) / cfg.batch_size)
    epochs = math.ceil(cfg.max_steps / per_epoch) if cfg.max_steps else cfg.epochs  # --max-steps wins
    batches = epoch_order(len(items), cfg.batch_size, epochs, cfg.seed)
    total = min(len(batches), cfg.max_steps) if cfg.max_steps else len(batches)
    sched = get_linear_schedule_with_warmup(opt, cfg.warmup_steps, max(total, 1))
    if accel.state.deepspeed_plugin is not None:  # no dataloader goes through prepare: say the micro batch
        accel.state.deepspeed_plugin.deepspeed_config["train_micro_batch_size_per_gpu"] = max(
            1, math.ceil(cfg.batch_size / world))
    net, opt, sched = accel.prepare(net, opt, sched)
    if world > 1:  # decorrelate the ranks' sampling (a resume restores each rank's own RNG below)
        torch.manual_seed(cfg.seed + 1_000_003 * rank)
    if ckpt:
        load_training_state(ckpt, opt, sched, accel)
    lm = accel.unwrap_model(net).lm
    if teacher is not None:
        teacher.student = lm
        if teacher.copy_model is not None:
            _place_teacher_copy(teacher, accel, sharded)
    if main:
        (out / "train_config.json").write_text(json.dumps(
            {**cfg.model_dump(mode="json"), "decisions": len(items), "dropped_too_long": n_in - len(items),
             "world_size": world, "distributed_type": str(accel.distributed_type).split(".")[-1]}, indent=2))
    ctx = Ctx(lm, enc, accel.device, cfg.chunk_size, cfg.bf16, net=net, par=AccelParallel(accel, net),
              sampler=sampler, seed=cfg.seed, seed_per_decision=cfg.sample_seed == "decision")

    log = MetricsLog(out / "metrics.jsonl", total, start=state["step"], enabled=progress) if main else nullcontext()
    with log:
        for step in range(state["step"], total):
            ctx.step = step
            ctx.sampler.sync(ctx, step)
            t0 = time.perf_counter()
            batch = [items[i] for i in batches[step]][rank::world]  # this rank's share of the global batch
            loss, m = objective(ctx, teacher, batch)
            accel.backward(loss)
            grad_norm = accel.clip_grad_norm_(params if not sharded else net.parameters(),
                                              cfg.max_grad_norm) if cfg.max_grad_norm else None
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            dt = time.perf_counter() - t0
            row = gather_row(accel, {"loss": float(loss.item()), **m,
                                     "peak_memory_mb": peak_memory_mb(accel.device)})
            tokens = sum(int(v) for k, v in row.items() if k.startswith("tokens_"))
            row = {"step": step + 1, "epoch": batches_epoch(step, len(items), cfg.batch_size), **row,
                   "lr": sched.get_last_lr()[0],
                   "grad_norm": None if grad_norm is None else float(grad_norm),
                   "step_time_s": round(dt, 3), "tokens_per_s": round(tokens / dt, 1) if dt > 0 else None}
            if main:
                log.log(row)
            if on_step:
                on_step(step + 1, row)
            if (step + 1) % cfg.save_every == 0 or step + 1 == total:
                save_checkpoint(out, step + 1, cfg.method, cfg.lora, cfg.keep_checkpoints, lm, tok, opt, sched,
                                accel, net)
    if cfg.save_final:
        save_final(out, lm, tok, base_dir, accel, net)
    accel.wait_for_everyone()
    if world > 1:
        accel.end_training()  # destroys the process group (a clean exit under torchrun)
    return out


def _check_engine(accel: Any) -> None:
    """accelerate silently runs FSDP/DeepSpeed configs as plain DDP on CPU processes: say so."""
    import os

    from accelerate.utils import DistributedType

    asked = [n for n, v in (("FSDP", "ACCELERATE_USE_FSDP"), ("DeepSpeed", "ACCELERATE_USE_DEEPSPEED"))
             if os.environ.get(v, "").lower() == "true"]
    if asked and accel.distributed_type == DistributedType.MULTI_CPU and accel.is_main_process:
        print(f"warning: {asked[0]} was requested but accelerate runs CPU processes as DDP (gloo); "
              "the weights are replicated, not sharded")


def _place_teacher_copy(teacher: Teacher, accel: Any, sharded: bool) -> None:
    """The frozen copy (full fine-tuning): on the device, or wrapped like the student when the engine
    shards weights (TRL's helpers for reference models), its LM head replicated for the chunked KL."""
    import copy

    from accelerate.utils import DistributedType

    if not sharded:
        teacher.to(accel.device)
        return
    from trl.models.utils import prepare_deepspeed, prepare_fsdp

    teacher.copy_head = copy.deepcopy(body_and_head(teacher.copy_model)[1]).to(accel.device)
    net = LossForward(teacher.copy_model)
    teacher.copy_net = (prepare_deepspeed(net, accel) if accel.distributed_type == DistributedType.DEEPSPEED
                        else prepare_fsdp(net, accel))


def batches_epoch(step: int, n: int, batch_size: int) -> int:
    return step // max(1, math.ceil(n / batch_size))


def _frozen(model: Any) -> Any:
    import copy

    f = copy.deepcopy(model)
    f.requires_grad_(False)
    return f.eval()
