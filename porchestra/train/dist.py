"""Running the objectives under accelerate's wrappers (single process, DDP, FSDP2, DeepSpeed ZeRO).

Two rules make a home-made loss correct under every engine:

1. Every use of a trainable parameter happens inside the wrapped module's forward. `LossForward` is
   the module accelerate wraps: its forward runs the transformer body and then a loss function on
   the hidden states at supervised positions (the chunked LM-head losses of losses.py), so DDP's
   reducer, FSDP's unsharding and DeepSpeed's hooks see the head too.
2. Every rank runs the same sequence of wrapped forwards and exactly one gradient-synchronised
   backward per optimizer step. A rank whose share of a term is empty runs a one-token dummy
   forward whose loss is multiplied by 0 (`zero_loss`). Global means divide by the global
   normaliser (one all-reduce) and multiply by the world size, because the engines average
   gradients over ranks: (1/W)·Σ_r ∇(W·Σ_{i∈r} wᵢxᵢ / Σ_all wᵢ) = ∇(Σ_all wᵢxᵢ / Σ_all wᵢ).
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterator

import torch

from .losses import Selected, select_supervised
from .modelio import body_and_head

LossFn = Callable[[Selected, torch.nn.Module], Any]


class LossForward(torch.nn.Module):
    """The causal LM as the module the engines wrap; forward(batch, fn) = fn(selected hidden, head)."""

    def __init__(self, lm: Any):
        super().__init__()
        self.lm = lm
        # accelerate's FSDP auto-wrap policy reads the block classes from the wrapped module
        self._no_split_modules = getattr(lm, "_no_split_modules", None)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor,
                fn: LossFn) -> Any:
        body, head = body_and_head(self.lm)
        h = body(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        return fn(select_supervised(h, labels), head)

    # TRL's unwrap_model_for_generation switches gradient checkpointing off and on around generation
    @property
    def is_gradient_checkpointing(self) -> bool:
        return bool(getattr(self.lm, "is_gradient_checkpointing", False))

    def gradient_checkpointing_disable(self) -> None:
        self.lm.gradient_checkpointing_disable()

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict | None = None) -> None:
        self.lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gradient_checkpointing_kwargs)


class Parallel:
    """What the objectives need to know about the other ranks. This default is one process."""

    world = 1
    rank = 0
    split_backward = True  # backprop the RWR term before building the OPD graph (half the peak memory)
    synced_generation = False  # every rank must call generate together (FSDP, ZeRO-3)

    def sum(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def no_sync(self) -> Any:
        return nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def barrier(self) -> None:
        return None

    @contextmanager
    def generation_model(self, lm: Any) -> Iterator[Any]:
        yield lm


class AccelParallel(Parallel):
    """Parallel over an accelerate.Accelerator and the wrapped LossForward it prepared."""

    def __init__(self, accel: Any, net: Any):
        from accelerate.utils import DistributedType

        self.accel, self.net = accel, net
        self.world, self.rank = accel.num_processes, accel.process_index
        kind = accel.distributed_type
        self.deepspeed = kind == DistributedType.DEEPSPEED
        self.fsdp = kind == DistributedType.FSDP
        # accelerate's DeepSpeed backward also runs the optimizer step: one backward per step only
        self.split_backward = not self.deepspeed
        zero3 = self.deepspeed and getattr(accel.state.deepspeed_plugin, "zero_stage", 0) == 3
        self.synced_generation = self.fsdp or zero3

    def sum(self, x: torch.Tensor) -> torch.Tensor:
        if self.world == 1:
            return x
        return self.accel.reduce(x.detach().float().reshape(1).to(self.accel.device).clone(), "sum")[0]

    def no_sync(self) -> Any:
        return self.accel.no_sync(self.net) if self.world > 1 and not self.deepspeed else nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        self.accel.backward(loss)

    def barrier(self) -> None:
        self.accel.wait_for_everyone()

    @contextmanager
    def generation_model(self, lm: Any) -> Iterator[Any]:
        if self.world == 1 and not self.deepspeed:
            yield lm
            return
        from trl.models.utils import unwrap_model_for_generation  # gathers ZeRO-3 weights for generate

        with unwrap_model_for_generation(self.net, self.accel) as unwrapped:
            lm = unwrapped.lm if isinstance(unwrapped, LossForward) else unwrapped
            if not (self.fsdp and hasattr(self.net, "unshard")):
                yield lm
                return
            # FSDP2: generate calls the LM below the root unit, whose own parameters (embeddings,
            # norm, head) stay sharded unless unsharded here; the blocks unshard in their forwards
            self.net.unshard()
            try:
                yield lm
            finally:
                self.net.reshard()


def dummy_batch(pad_id: int, device: Any) -> dict[str, torch.Tensor]:
    """Two tokens, the second supervised: enough to touch every parameter of body and head."""
    ids = torch.tensor([[pad_id, pad_id]], device=device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "labels": torch.tensor([[-100, pad_id]], device=device)}


def zero_loss(net: Any, pad_id: int, device: Any) -> torch.Tensor:
    """A loss of exactly 0 whose graph reaches every trainable parameter through the wrapper."""
    return net(**dummy_batch(pad_id, device), fn=lambda sel, head: head(sel.hidden).float().sum() * 0.0)
