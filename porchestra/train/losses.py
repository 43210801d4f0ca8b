"""Memory-efficient token losses computed from hidden states, a chunk of tokens at a time.

The language-model head is applied to at most `chunk` selected tokens at once and each chunk runs
under activation checkpointing, so neither the forward nor the backward pass ever holds more than
chunk × vocabulary logits (per model). Only positions that carry supervision (completion tokens, not
prompt or padding) are ever projected onto the vocabulary.

Normalisation (paper E.2.4): every loss is the mean over a decision's output tokens, then the mean
over the decisions in the minibatch that carry that supervision (RWR: a weighted mean with the
decision weights; binary rewards make it the plain mean over successful decisions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Literal

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

Divergence = Literal["reverse_kl", "forward_kl", "jsd"]
IGNORE = -100


@dataclass
class Selected:
    """Hidden states at supervised positions (row-major over the batch), their target tokens and
    the index of the sequence each came from."""

    hidden: torch.Tensor  # (N, d)
    targets: torch.Tensor  # (N,)
    seq: torch.Tensor  # (N,)
    n_seqs: int


def select_supervised(hidden: torch.Tensor, labels: torch.Tensor) -> Selected:
    """Shift for next-token prediction and keep positions whose label is not IGNORE."""
    h, tgt = hidden[:, :-1], labels[:, 1:]
    mask = tgt != IGNORE
    seq = torch.arange(labels.shape[0], device=labels.device)[:, None].expand_as(tgt)
    return Selected(h[mask], tgt[mask], seq[mask], labels.shape[0])


def _chunks(n: int, chunk: int) -> list[tuple[int, int]]:
    return [(i, min(n, i + chunk)) for i in range(0, n, max(1, chunk))]


def _head_fn(head: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda h: head(h).float()  # log-softmax in fp32 even under bf16 autocast


def token_logprobs(sel: Selected, head: torch.nn.Module, chunk: int = 1024) -> torch.Tensor:
    """log π(target) for every selected token, (N,)."""
    proj = _head_fn(head)

    def piece(h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return -F.cross_entropy(proj(h), t, reduction="none")

    out = [checkpoint(piece, sel.hidden[a:b], sel.targets[a:b], use_reentrant=False)
           for a, b in _chunks(sel.targets.numel(), chunk)]
    return torch.cat(out) if out else sel.hidden.new_zeros(0, dtype=torch.float32)


def divergence_terms(ls: torch.Tensor, lt: torch.Tensor, kind: Divergence, beta: float = 0.5) -> torch.Tensor:
    """Per-row divergence between student log-probs `ls` and teacher log-probs `lt` (rows × V).

    reverse_kl: KL(student ‖ teacher) = Σ p_s (log p_s − log p_t)   (OPOD's default, paper E.2.4)
    forward_kl: KL(teacher ‖ student) = Σ p_t (log p_t − log p_s)
    jsd:        β·KL(p_s ‖ m) + (1−β)·KL(p_t ‖ m),  m = β p_s + (1−β) p_t  (β = 0.5: symmetric JSD)
    """
    if kind == "reverse_kl":
        return (ls.exp() * (ls - lt)).sum(-1)
    if kind == "forward_kl":
        return (lt.exp() * (lt - ls)).sum(-1)
    if kind == "jsd":
        if not 0.0 < beta < 1.0:
            raise ValueError(f"jsd beta must be in (0, 1), got {beta}")
        lm = torch.logsumexp(torch.stack([ls + math.log(beta), lt + math.log(1 - beta)]), dim=0)
        return beta * (ls.exp() * (ls - lm)).sum(-1) + (1 - beta) * (lt.exp() * (lt - lm)).sum(-1)
    raise ValueError(f"unknown divergence {kind!r}: reverse_kl | forward_kl | jsd")


def token_divergence(student: Selected, teacher_hidden: torch.Tensor, student_head: torch.nn.Module,
                     teacher_head: torch.nn.Module, kind: Divergence = "reverse_kl", chunk: int = 512,
                     beta: float = 0.5, with_logprobs: bool = False) -> Any:
    """Full-vocabulary divergence at every selected token, (N,). Gradients reach the student's
    hidden states/head only: the teacher side is computed under no_grad. With `with_logprobs`,
    returns (divergence, the student's detached log-probability of each target token)."""
    if teacher_hidden.shape != student.hidden.shape:
        raise ValueError(f"student and teacher select different tokens: {tuple(student.hidden.shape)} "
                         f"vs {tuple(teacher_hidden.shape)}")
    proj_s, proj_t = _head_fn(student_head), _head_fn(teacher_head)
    teacher_hidden = teacher_hidden.detach()

    def piece(hs: torch.Tensor, ht: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ls = F.log_softmax(proj_s(hs), dim=-1)
        with torch.no_grad():
            lt = F.log_softmax(proj_t(ht), dim=-1)
        return divergence_terms(ls, lt, kind, beta), ls.detach().gather(-1, tgt[:, None])[:, 0]

    out = [checkpoint(piece, student.hidden[a:b], teacher_hidden[a:b], student.targets[a:b], use_reentrant=False)
           for a, b in _chunks(student.targets.numel(), chunk)]
    empty = student.hidden.new_zeros(0, dtype=torch.float32)
    div = torch.cat([d for d, _ in out]) if out else empty
    if not with_logprobs:
        return div
    return div, (torch.cat([lp for _, lp in out]) if out else empty)


def per_sequence_mean(values: torch.Tensor, seq: torch.Tensor, n_seqs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean of `values` per sequence, token count per sequence); sequences without tokens get 0."""
    sums = torch.zeros(n_seqs, dtype=values.dtype, device=values.device).index_add(0, seq, values)
    counts = torch.bincount(seq, minlength=n_seqs).to(values.dtype)
    return sums / counts.clamp(min=1), counts


def weighted_decision_mean(per_seq: torch.Tensor, weights: torch.Tensor, counts: torch.Tensor,
                           reduce_sum: Callable[[torch.Tensor], torch.Tensor] | None = None,
                           world: int = 1) -> torch.Tensor:
    """Σ w_i·x_i / Σ w_i over decisions with w_i > 0 and at least one token; 0 when there are none
    (kept in the graph so a term that is absent from a minibatch contributes exactly zero).

    Data parallel: `reduce_sum` sums Σ w_i over the ranks and the result is scaled by `world`, so that
    the engines' gradient average over ranks equals the gradient of the global-batch mean."""
    w = weights.to(per_seq.dtype) * (counts > 0).to(per_seq.dtype)
    total = w.sum() if reduce_sum is None else reduce_sum(w.sum().detach())
    if total.item() <= 0:
        return (per_seq * 0.0).sum()
    if reduce_sum is None:
        return (w * per_seq).sum() / total
    return (w * per_seq).sum() * (world / total)
