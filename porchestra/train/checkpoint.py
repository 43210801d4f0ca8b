"""Checkpoints and the final policy, written by rank 0 (every rank joins the collective parts).

checkpoint-<step>/ holds the adapter (LoRA) or the full weights in HF layout, the tokenizer,
trainer_state.json (written last) and the training state:
- one process or DDP (optimizer state replicated on every rank): optimizer.pt, scheduler.pt, rng.pt
  (rank 0's RNG) and, with several ranks, rng-ranks.pt (every rank's RNG, restored per rank);
- FSDP / DeepSpeed (optimizer state sharded): accelerate's save_state in engine_state/ plus
  scheduler.pt; the HF weights are gathered with accelerator.get_state_dict.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from .jsonl import dumps
from .modelio import is_peft

STATE = "trainer_state.json"
ENGINE = "engine_state"


def latest_checkpoint(out: Path) -> Path | None:
    done = [p for p in out.glob("checkpoint-*") if (p / STATE).is_file()]
    return max(done, key=lambda p: int(p.name.split("-")[1])) if done else None


def is_sharded(accel: Any) -> bool:
    from accelerate.utils import DistributedType

    return accel is not None and accel.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED)


def _full_state(accel: Any, net: Any) -> dict[str, torch.Tensor] | None:
    """Sharded engines: the full state dict of the LM (collective; rank 0 gets it)."""
    sd = accel.get_state_dict(net)
    return None if sd is None else {k.removeprefix("lm."): v for k, v in sd.items()}


def _save_model(dest: Path, model: Any, state: dict | None) -> None:
    model.save_pretrained(dest, **({"state_dict": state} if state is not None else {}))


def save_checkpoint(out: Path, step: int, method: str, lora: bool, keep: int, model: Any, tok: Any,
                    opt: Any, sched: Any, accel: Any = None, net: Any = None) -> Path:
    """Write checkpoint-<step> through a temp dir and one rename; keep the newest `keep`."""
    from accelerate.utils import gather_object

    main = accel is None or accel.is_main_process
    world = 1 if accel is None else accel.num_processes
    dest, tmp = out / f"checkpoint-{step}", out / f".checkpoint-{step}.tmp"
    sharded = is_sharded(accel)
    state = _full_state(accel, net) if sharded else None
    rngs = gather_object([torch.get_rng_state()]) if world > 1 else None
    if main:
        shutil.rmtree(tmp, ignore_errors=True)
        _save_model(tmp, model, state)
        tok.save_pretrained(tmp)
        torch.save(sched.state_dict(), tmp / "scheduler.pt")
        torch.save(torch.get_rng_state(), tmp / "rng.pt")
        if rngs is not None:
            torch.save(rngs, tmp / "rng-ranks.pt")
        if not sharded:
            torch.save(opt.state_dict(), tmp / "optimizer.pt")
    if sharded:
        accel.wait_for_everyone()
        accel.save_state(str(tmp / ENGINE))
    if accel is not None:
        accel.wait_for_everyone()
    if main:
        (tmp / STATE).write_text(dumps({"step": step, "method": method, "lora": lora, "world_size": world}))
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
        done = sorted((p for p in out.glob("checkpoint-*") if (p / STATE).is_file()),
                      key=lambda p: int(p.name.split("-")[1]))
        for old in done[:-max(1, keep)]:
            shutil.rmtree(old, ignore_errors=True)
    if accel is not None:
        accel.wait_for_everyone()
    return dest


def load_training_state(ckpt: Path, opt: Any, sched: Any, accel: Any) -> None:
    """Optimizer, scheduler and this rank's RNG from a checkpoint (after accelerator.prepare)."""
    if is_sharded(accel):
        accel.load_state(str(ckpt / ENGINE))
    else:
        # to CPU first: the optimizer moves its state to each parameter's device (accelerate's CPU device
        # under gloo is "cpu:<rank>", which torch.load cannot map to)
        opt.load_state_dict(torch.load(ckpt / "optimizer.pt", map_location="cpu"))
    sched.load_state_dict(torch.load(ckpt / "scheduler.pt"))
    ranks = ckpt / "rng-ranks.pt"
    if accel.num_processes > 1 and ranks.is_file():
        states = torch.load(ranks)
        if len(states) == accel.num_processes:  # a resume on another world size keeps the fresh RNGs
            torch.set_rng_state(states[accel.process_index])
            return
    if accel.num_processes == 1:
        torch.set_rng_state(torch.load(ckpt / "rng.pt"))


def save_final(out: Path, model: Any, tok: Any, base_dir: Path | None, accel: Any = None, net: Any = None) -> Path:
    """OUT/final: standalone merged HF checkpoint; OUT/adapter: the LoRA adapter (LoRA runs)."""
    final, tmp = out / "final", out / ".final.tmp"
    state = _full_state(accel, net) if is_sharded(accel) else None
    if accel is not None and not accel.is_main_process:
        accel.wait_for_everyone()
        return final
    shutil.rmtree(tmp, ignore_errors=True)
    if is_peft(model):
        adapter_tmp = out / ".adapter.tmp"
        shutil.rmtree(adapter_tmp, ignore_errors=True)
        _save_model(adapter_tmp, model, state)
        if base_dir is not None:  # point the adapter at the real on-disk base
            p = adapter_tmp / "adapter_config.json"
            cfg = json.loads(p.read_text())
            from .modelio import portable_base

            cfg["base_model_name_or_path"] = portable_base(base_dir)
            p.write_text(json.dumps(cfg, indent=2))
            tok.save_pretrained(adapter_tmp)
        if state is None:
            merged = copy.deepcopy(model).merge_and_unload()
        else:  # sharded weights: merge the saved adapter into a fresh copy of the base, on rank 0
            from peft import PeftModel
            from transformers import AutoModelForCausalLM

            if base_dir is None:
                raise ValueError("--model: a sharded LoRA run needs an on-disk base to write final/")
            merged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir),
                                               adapter_tmp).merge_and_unload()
        if base_dir is not None:
            shutil.rmtree(out / "adapter", ignore_errors=True)
            os.replace(adapter_tmp, out / "adapter")
        else:
            shutil.rmtree(adapter_tmp, ignore_errors=True)
        merged.save_pretrained(tmp)
        del merged
    else:
        _save_model(tmp, model, state)
    tok.save_pretrained(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    if accel is not None:
        accel.wait_for_everyone()
    return final
