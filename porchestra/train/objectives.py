"""Per-minibatch objectives: likelihood (SFT / RWR), OPD and their OPOD sum.

    L_OPOD = ρ · L_RWR + λ · L_OPD                                            (ρ = --rwr-weight, 1)
    L_RWR  = Σ_i w_i · mean_k[−log π_θ(a_i,k | x_i, a_i,<k)] / Σ_i w_i        (decisions with w_i > 0)
    L_OPD  = mean_i mean_k D(π_θ(·|x_i, y_i,<k) ‖ π_T(·|x_i ⊕ H_i, y_i,<k)),   y_i ~ π_θ(·|x_i)
                                                                            (decisions with a hint)
π_T is the frozen SFT policy; D is reverse KL (default), forward KL or JSD over the full vocabulary.
With λ = 0 the OPD term is not computed at all, so the loss is the RWR loss bit for bit; with ρ = 0
the RWR term is not computed (OPD only). With both terms present, `opod_loss` backpropagates the RWR
term itself before building the OPD graph and returns L with only the OPD part attached (the
caller's backward adds the OPD gradients).

Every model call goes through `ctx.net` (dist.LossForward, wrapped by the distributed engine) and
every mean over decisions is a global-batch mean under data parallelism (see dist.py).
"""

from __future__ import annotations

import hashlib
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import BaseModel

from .data import Encoder, Item, pad_batch, pad_labeled
from .dist import LossForward, Parallel, zero_loss
from .losses import Divergence, per_sequence_mean, token_divergence, token_logprobs, weighted_decision_mean
from .modelio import Teacher, autocast_for
from .sampler import GenSettings, InProcessSampler, Sample, sample_replies

__all__ = ["Ctx", "GenSettings", "OPODSettings", "likelihood_loss", "opd_divergence", "opod_loss",
           "sample_replies", "sequence_logprob"]


@dataclass
class Ctx:
    """What an objective needs besides the batch."""

    model: Any  # the causal LM itself (PEFT or not): generation, adapter switching, saving
    enc: Encoder
    device: torch.device
    chunk: int = 512
    bf16: bool = False
    net: Any = None  # LossForward(model) as the engine wrapped it; None: unwrapped
    par: Parallel = field(default_factory=Parallel)
    sampler: Any = None  # None: InProcessSampler
    seed: int = 0
    step: int = 0
    seed_per_decision: bool = False  # sample each decision from hash(seed, step, decision id)

    def __post_init__(self) -> None:
        if self.net is None:
            self.net = LossForward(self.model)
        if self.sampler is None:
            self.sampler = InProcessSampler()

    def seeds(self, items: list[Item]) -> list[int] | None:
        if not self.seed_per_decision:
            return None
        return [int.from_bytes(hashlib.sha256(f"{self.seed}:{self.step}:{it.decision_id}".encode()).digest()[:4],
                               "little") for it in items]


def _tensor(xs: list[float], device: torch.device) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float32, device=device)


def _pad_empty(ctx: Ctx, pairs: list[tuple[list[int], list[int]]], weights: list[float]
               ) -> tuple[list[tuple[list[int], list[int]]], list[float]]:
    """Data parallel: a rank with nothing for a term still runs its forward, on one weight-0 token
    (sequences are (ids, labels): one pad token predicting another)."""
    if pairs or ctx.par.world == 1:
        return pairs, weights
    from .losses import IGNORE

    return [([ctx.enc.pad_id] * 2, [IGNORE, ctx.enc.pad_id])], [0.0]


def decision_mean(ctx: Ctx, per_seq: torch.Tensor, weights: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    if ctx.par.world == 1:
        return weighted_decision_mean(per_seq, weights, counts)
    return weighted_decision_mean(per_seq, weights, counts, ctx.par.sum, ctx.par.world)


def sequence_logprob(ctx: Ctx, pairs: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(token-mean log-likelihood per sequence, token counts) of replies given prompts."""
    return labeled_logprob(ctx, pad_batch(pairs, ctx.enc.pad_id, ctx.device))


def labeled_logprob(ctx: Ctx, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(token-mean log-likelihood per sequence, token counts) of the labelled tokens of a batch."""

    def fn(sel: Any, head: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        return per_sequence_mean(token_logprobs(sel, head, ctx.chunk), sel.seq, sel.n_seqs)

    with autocast_for(ctx.device, ctx.bf16):
        return ctx.net(**batch, fn=fn)


def likelihood_loss(ctx: Ctx, items: list[Item]) -> tuple[torch.Tensor, dict[str, float]]:
    """Weighted token-mean NLL over the items with weight > 0 (SFT: all weights 1)."""
    sup = [it for it in items if it.weight > 0]
    if not sup and ctx.par.world == 1:
        return _zero(ctx), {"n_rwr": 0, "tokens_rwr": 0}
    seqs, weights = _pad_empty(ctx, [ctx.enc.supervised(it) for it in sup], [it.weight for it in sup])
    mean_lp, counts = labeled_logprob(ctx, pad_labeled(seqs, ctx.enc.pad_id, ctx.device))
    loss = decision_mean(ctx, -mean_lp, _tensor(weights, ctx.device), counts)
    return loss, {"n_rwr": len(sup), "tokens_rwr": int(counts.sum().item()) if sup else 0}


def _zero(ctx: Ctx) -> torch.Tensor:
    if ctx.par.world > 1:  # through the wrapper, so that the synchronised backward sees every parameter
        with autocast_for(ctx.device, ctx.bf16):
            return zero_loss(ctx.net, ctx.enc.pad_id, ctx.device)
    p = next(p for p in ctx.model.parameters() if p.requires_grad)
    return (p.sum() * 0.0).float()


def _teacher_hidden(ctx: Ctx, teacher: Teacher, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Any]:
    """The teacher's hidden states at the supervised positions, and its LM head (None: the student's,
    which LoRA leaves untouched)."""
    with teacher.active():
        net = ctx.net if teacher.copy_model is None else teacher.net()
        hidden, _ = net(**batch, fn=lambda sel, head: (sel.hidden, sel.targets))
    return hidden, teacher.head()


def opd_divergence(ctx: Ctx, teacher: Teacher, items: list[Item], replies: list[list[int]],
                   kind: Divergence = "reverse_kl", beta: float = 0.5, with_logprobs: bool = False) -> Any:
    """(per-decision token-mean divergence, token counts) along `replies` (one per item): the student
    reads x_i, the teacher x_i ⊕ H_i, both score the same reply tokens. `with_logprobs` adds the
    student's log-probability of each reply token (flattened in item order)."""
    s_pairs = [(ctx.enc.prompt(it.messages), y) for it, y in zip(items, replies)]
    t_pairs = [(ctx.enc.prompt(it.teacher_messages), y) for it, y in zip(items, replies)]
    s_batch = pad_batch(s_pairs, ctx.enc.pad_id, ctx.device)
    t_batch = pad_batch(t_pairs, ctx.enc.pad_id, ctx.device)
    with autocast_for(ctx.device, ctx.bf16):
        t_hidden, t_head = _teacher_hidden(ctx, teacher, t_batch)

        def fn(sel: Any, head: torch.nn.Module) -> Any:
            if t_hidden.shape != sel.hidden.shape:
                raise RuntimeError("student and teacher sequences disagree on the reply tokens")
            div, lp = token_divergence(sel, t_hidden, head, head if t_head is None else t_head, kind, ctx.chunk,
                                       beta, with_logprobs=True)
            return (*per_sequence_mean(div, sel.seq, sel.n_seqs), lp)

        per, counts, lp = ctx.net(**s_batch, fn=fn)
    return (per, counts, lp) if with_logprobs else (per, counts)


class OPODSettings(BaseModel):
    lam: float = 1.0
    rwr_weight: float = 1.0  # ρ; 0 = OPD only (no RWR term)
    divergence: Divergence = "reverse_kl"
    jsd_beta: float = 0.5
    gen: GenSettings = GenSettings()


def _logprob_gap(samples: list[Sample], lp: torch.Tensor) -> float | None:
    """Largest |server log-prob − trainer log-prob| over the sampled tokens (None: not reported)."""
    ref = [x for s in samples for x in (s.logprobs if s.logprobs is not None else [float("nan")] * len(s.tokens))]
    if not samples or all(s.logprobs is None for s in samples) or len(ref) != lp.numel():
        return None
    r = torch.tensor(ref, dtype=torch.float32)
    ok = ~torch.isnan(r)
    return float((r[ok] - lp.detach().float().cpu()[ok]).abs().max()) if ok.any() else None


def opod_loss(ctx: Ctx, teacher: Teacher | None, items: list[Item], cfg: OPODSettings
              ) -> tuple[torch.Tensor, dict[str, float]]:
    flagged = [it for it in items if it.hint]
    n_opd_all = len(flagged) if ctx.par.world == 1 else int(ctx.par.sum(torch.tensor(float(len(flagged)))).item())
    do_opd = cfg.lam > 0 and teacher is not None and n_opd_all > 0
    split = do_opd and ctx.par.split_backward
    loss_rwr: torch.Tensor | None = None
    if cfg.rwr_weight > 0:
        with ctx.par.no_sync() if split else nullcontext():
            loss_rwr, metrics = likelihood_loss(ctx, items)
            if cfg.rwr_weight != 1:
                loss_rwr = cfg.rwr_weight * loss_rwr
            metrics["loss_rwr"] = float(loss_rwr.item())
            if split and loss_rwr.requires_grad and (metrics["n_rwr"] or ctx.par.world > 1):
                # Backpropagate the RWR term now so its activations are freed before the OPD passes run;
                # the returned loss carries only the OPD graph (same gradients, about half the peak memory).
                ctx.par.backward(loss_rwr)
                loss_rwr = loss_rwr.detach()
    else:
        metrics = {"n_rwr": 0, "tokens_rwr": 0, "loss_rwr": 0.0}
    if not do_opd:
        metrics.update(loss_opd=0.0, n_opd=0, tokens_opd=0)
        return (loss_rwr if loss_rwr is not None else _zero(ctx)), metrics
    prompts = [ctx.enc.prompt(it.messages) for it in flagged]
    if not prompts and ctx.par.synced_generation:  # sharded weights: every rank joins every generate
        ctx.sampler.sample(ctx, [[ctx.enc.eos_id]], cfg.gen)
    samples = ctx.sampler.sample(ctx, prompts, cfg.gen, seeds=ctx.seeds(flagged))
    run_items, replies = (flagged, [s.tokens for s in samples]) if flagged else ([_dummy_item()], [[ctx.enc.pad_id]])
    per_dec, counts, lp = opd_divergence(ctx, teacher, run_items, replies, cfg.divergence, cfg.jsd_beta,
                                         with_logprobs=True)
    weights = torch.ones_like(per_dec) if flagged else torch.zeros_like(per_dec)
    loss_opd = decision_mean(ctx, per_dec, weights, counts)
    metrics.update(loss_opd=float(loss_opd.item()), n_opd=len(flagged),
                   tokens_opd=int(counts.sum().item()) if flagged else 0)
    gap = _logprob_gap(samples, lp) if flagged else None
    if gap is not None:
        metrics["sampler_logprob_gap"] = gap
    total = cfg.lam * loss_opd
    return (total if loss_rwr is None else loss_rwr + total), metrics


def _dummy_item() -> Item:
    """A rank with no hinted decision still runs the teacher and student forwards (weight 0)."""
    return Item("dummy", [{"role": "user", "content": "-"}], "", 0.0, "-", None)
