"""Loading the policy to train, its frozen teacher, and reading hidden states without full logits.

Base model specs: `local:smollm2` (the converted cache dir of the embedded GGUF, created on first
use exactly as the local backend does), `local:<dir>` or a plain `<dir>`: an HF checkpoint, or a
PEFT adapter directory, which is merged into its base so that the merged weights are the new
starting point (an SFT LoRA becomes "the SFT policy").
"""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch
from pydantic import BaseModel


class LoraSettings(BaseModel):
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: str | list[str] = "all-linear"


class BaseModelError(ValueError):
    """The --model value cannot be resolved to weights."""


def resolve_base_dir(spec: str) -> Path:
    """A model spec → a directory with config.json or adapter_config.json."""
    from ..models import local_weights as lw

    rest = spec.removeprefix("local:")
    try:
        src = lw.resolve(rest)
    except ValueError as e:
        raise BaseModelError(f"--model {spec!r}: {e}") from None
    if src.kind == "gguf":
        assert src.cache_dir is not None
        lw.ensure_converted(src.cache_dir, lw._marker_for(src.path), lambda out: lw.convert_gguf(src.path, out))
        return src.cache_dir
    return src.path


def portable_base(base_dir: Path) -> str:
    """How an adapter names its base: `local:<name>` for an embedded model's converted cache (that
    path differs per user and machine; the name resolves everywhere), else the directory itself."""
    from ..models import local_weights as lw

    for name in lw.EMBEDDED:
        if Path(base_dir).resolve() == (lw.cache_root() / "models" / name).resolve():
            return f"local:{name}"
    return str(base_dir)


def adapter_base(path: Path) -> Path:
    cfg = json.loads((path / "adapter_config.json").read_text())
    base = str(cfg.get("base_model_name_or_path") or "")
    if not base:
        raise BaseModelError(f"{path}/adapter_config.json names no base_model_name_or_path")
    return resolve_base_dir(base if base.startswith("local:") else f"local:{base}")


def load_merged(spec: str, dtype: torch.dtype = torch.float32) -> tuple[Any, Any, Path | None]:
    """(model, tokenizer, base_dir): the dense starting weights. base_dir is the on-disk directory
    the weights equal (None when an adapter was merged in memory)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_base_dir(spec)
    if (path / "adapter_config.json").is_file():
        from peft import PeftModel

        base = adapter_base(path)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
        tok_dir = path if (path / "tokenizer_config.json").is_file() else base
        model = PeftModel.from_pretrained(model, path).merge_and_unload()
        return model, AutoTokenizer.from_pretrained(tok_dir), None
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    return model, AutoTokenizer.from_pretrained(path), path


def add_lora(model: Any, lora: LoraSettings, resume_from: Path | None = None) -> Any:
    from peft import LoraConfig, PeftModel, get_peft_model

    if resume_from is not None:
        return PeftModel.from_pretrained(model, resume_from, is_trainable=True)
    cfg = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                     target_modules=lora.target_modules, task_type="CAUSAL_LM")
    return get_peft_model(model, cfg)


def is_peft(model: Any) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def body_and_head(model: Any) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The transformer body (returns hidden states) and the LM head of a causal LM (PEFT or not)."""
    base = model.get_base_model() if is_peft(model) else model
    body = getattr(base, base.base_model_prefix, None)
    head = base.get_output_embeddings()
    if body is None or head is None:
        raise ValueError(f"cannot split {type(base).__name__} into body and LM head")
    return body, head


def hidden_states(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    body, _ = body_and_head(model)
    out = body(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False)
    return out.last_hidden_state


@dataclass
class Teacher:
    """The frozen SFT policy. With a LoRA student it is the same network with the adapter disabled
    (no extra memory); with full fine-tuning it is a separate frozen copy made before training."""

    student: Any
    copy_model: Any | None = None
    copy_net: Any | None = None  # the copy as an engine wrapped it (FSDP, ZeRO-3); None: LossForward(copy)
    copy_head: Any | None = None  # replica of the copy's LM head, read outside the copy's (sharded) forward

    @classmethod
    def frozen_from(cls, model: Any) -> "Teacher":
        if is_peft(model):
            return cls(model)
        frozen = copy.deepcopy(model)
        frozen.requires_grad_(False)
        frozen.eval()
        return cls(model, frozen)

    @contextmanager
    def active(self) -> Iterator[Any]:
        """Yields the teacher network, in eval mode and without gradient tracking."""
        if self.copy_model is not None:
            with torch.no_grad():
                yield self.copy_model
            return
        was_training = self.student.training
        self.student.eval()
        try:
            with torch.no_grad(), self.student.disable_adapter():
                yield self.student
        finally:
            self.student.train(was_training)

    def hidden_and_head(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.nn.Module]:
        with self.active() as net:
            h = hidden_states(net, batch)
            _, head = body_and_head(net)
        return h, head

    def net(self) -> Any:
        """The frozen copy as the module the objectives call (dist.LossForward)."""
        if self.copy_net is None:
            from .dist import LossForward

            self.copy_net = LossForward(self.copy_model)
        return self.copy_net

    def head(self) -> Any:
        """The teacher's LM head, or None when it is the student's (LoRA leaves the head alone)."""
        if self.copy_model is None:
            return None
        return self.copy_head if self.copy_head is not None else body_and_head(self.copy_model)[1]

    def to(self, device: Any) -> "Teacher":
        if self.copy_model is not None:
            self.copy_model.to(device)
        return self


def autocast_for(device: torch.device, bf16: bool) -> Any:
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()
