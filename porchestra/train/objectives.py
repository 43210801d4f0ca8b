"""Per-minibatch objectives: likelihood (SFT / RWR), OPD and their OPOD sum.

    L_OPOD = L_RWR + λ · L_OPD
    L_RWR  = Σ_i w_i · mean_k[−log π_θ(a_i,k | x_i, a_i,<k)] / Σ_i w_i        (decisions with w_i > 0)
    L_OPD  = mean_i mean_k D(π_θ(·|x_i, y_i,<k) ‖ π_T(·|x_i ⊕ H_i, y_i,<k)),   y_i ~ π_θ(·|x_i)
                                                                            (decisions with a hint)
π_T is the frozen SFT policy; D is reverse KL (default), forward KL or JSD over the full vocabulary.
With λ = 0 the OPD term is not computed at all, so the loss is the RWR loss bit for bit. With both
terms present, `opod_loss` backpropagates the RWR term itself before building the OPD graph and
returns L with only the OPD part attached (the caller's backward adds the OPD gradients).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from pydantic import BaseModel

from .data import Encoder, Item, left_pad, pad_batch
from .losses import Divergence, per_sequence_mean, select_supervised, token_divergence, token_logprobs, \
    weighted_decision_mean
from .modelio import Teacher, autocast_for, body_and_head, hidden_states


class GenSettings(BaseModel):
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0


@dataclass
class Ctx:
    """What an objective needs besides the batch."""

    model: Any
    enc: Encoder
    device: torch.device
    chunk: int = 512
    bf16: bool = False


def _tensor(xs: list[float], device: torch.device) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float32, device=device)


def sequence_logprob(ctx: Ctx, pairs: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(token-mean log-likelihood per sequence, token counts) of replies given prompts."""
    batch = pad_batch(pairs, ctx.enc.pad_id, ctx.device)
    _, head = body_and_head(ctx.model)
    with autocast_for(ctx.device, ctx.bf16):
        sel = select_supervised(hidden_states(ctx.model, batch), batch["labels"])
        lp = token_logprobs(sel, head, ctx.chunk)
    return per_sequence_mean(lp, sel.seq, sel.n_seqs)


def likelihood_loss(ctx: Ctx, items: list[Item]) -> tuple[torch.Tensor, dict[str, float]]:
    """Weighted token-mean NLL over the items with weight > 0 (SFT: all weights 1)."""
    sup = [it for it in items if it.weight > 0]
    if not sup:
        return _zero(ctx), {"n_rwr": 0, "tokens_rwr": 0}
    pairs = [(ctx.enc.prompt(it.messages), ctx.enc.reply(it.decision)) for it in sup]
    mean_lp, counts = sequence_logprob(ctx, pairs)
    loss = weighted_decision_mean(-mean_lp, _tensor([it.weight for it in sup], ctx.device), counts)
    return loss, {"n_rwr": len(sup), "tokens_rwr": int(counts.sum().item())}


def _zero(ctx: Ctx) -> torch.Tensor:
    p = next(p for p in ctx.model.parameters() if p.requires_grad)
    return (p.sum() * 0.0).float()


@torch.no_grad()
def sample_replies(model: Any, enc: Encoder, prompts: list[list[int]], gen: GenSettings,
                   num_return: int = 1) -> list[list[int]]:
    """Sampled replies (token ids, cut after the first end-of-turn token), `num_return` per prompt,
    grouped prompt by prompt."""
    was_training = model.training
    model.eval()
    try:
        batch = left_pad(prompts, enc.pad_id, next(model.parameters()).device)
        out = model.generate(**batch, do_sample=True, temperature=gen.temperature, top_p=gen.top_p,
                             top_k=0, max_new_tokens=gen.max_new_tokens, num_return_sequences=num_return,
                             pad_token_id=enc.pad_id, eos_token_id=enc.eos_id)
    finally:
        model.train(was_training)
    replies = []
    for row in out[:, batch["input_ids"].shape[1]:].tolist():
        cut = row.index(enc.eos_id) + 1 if enc.eos_id in row else len(row)
        replies.append(row[:cut] or [enc.eos_id])
    return replies


def opd_divergence(ctx: Ctx, teacher: Teacher, items: list[Item], replies: list[list[int]],
                   kind: Divergence = "reverse_kl", beta: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-decision token-mean divergence, token counts) along `replies` (one per item): the student
    reads x_i, the teacher x_i ⊕ H_i, both score the same reply tokens."""
    s_pairs = [(ctx.enc.prompt(it.messages), y) for it, y in zip(items, replies)]
    t_pairs = [(ctx.enc.prompt(it.teacher_messages), y) for it, y in zip(items, replies)]
    s_batch = pad_batch(s_pairs, ctx.enc.pad_id, ctx.device)
    t_batch = pad_batch(t_pairs, ctx.enc.pad_id, ctx.device)
    with autocast_for(ctx.device, ctx.bf16):
        t_hidden, t_head = teacher.hidden_and_head(t_batch)
        t_sel = select_supervised(t_hidden, t_batch["labels"])
        s_sel = select_supervised(hidden_states(ctx.model, s_batch), s_batch["labels"])
        if not torch.equal(s_sel.targets, t_sel.targets):
            raise RuntimeError("student and teacher sequences disagree on the reply tokens")
        _, s_head = body_and_head(ctx.model)
        div = token_divergence(s_sel, t_sel.hidden, s_head, t_head, kind, ctx.chunk, beta)
    return per_sequence_mean(div, s_sel.seq, s_sel.n_seqs)


class OPODSettings(BaseModel):
    lam: float = 1.0
    divergence: Divergence = "reverse_kl"
    jsd_beta: float = 0.5
    gen: GenSettings = GenSettings()


def opod_loss(ctx: Ctx, teacher: Teacher | None, items: list[Item], cfg: OPODSettings
              ) -> tuple[torch.Tensor, dict[str, float]]:
    loss_rwr, metrics = likelihood_loss(ctx, items)
    metrics["loss_rwr"] = float(loss_rwr.item())
    flagged = [it for it in items if it.hint]
    if cfg.lam == 0 or not flagged or teacher is None:
        metrics.update(loss_opd=0.0, n_opd=0, tokens_opd=0)
        return loss_rwr, metrics
    if metrics["n_rwr"] and loss_rwr.requires_grad:
        # Backpropagate the RWR term now so its activations are freed before the OPD passes run; the
        # returned loss carries only the OPD graph (same gradients, about half the peak memory).
        loss_rwr.backward()
        loss_rwr = loss_rwr.detach()
    replies = sample_replies(ctx.model, ctx.enc, [ctx.enc.prompt(it.messages) for it in flagged], cfg.gen)
    per_dec, counts = opd_divergence(ctx, teacher, flagged, replies, cfg.divergence, cfg.jsd_beta)
    loss_opd = weighted_decision_mean(per_dec, torch.ones_like(per_dec), counts)
    metrics.update(loss_opd=float(loss_opd.item()), n_opd=len(flagged), tokens_opd=int(counts.sum().item()))
    return loss_rwr + cfg.lam * loss_opd, metrics
