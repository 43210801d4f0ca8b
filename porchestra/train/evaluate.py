"""Offline probes of a trained policy: decision log-likelihoods and the OPD divergence on fixed replies.

Used by the end-to-end test and the benchmark; handy for checking that OPOD moved a policy toward its
hint-conditioned teacher (`porchestra.train.evaluate.opd_gap`).
"""

from __future__ import annotations

from typing import Any

import torch

from .data import Encoder, Item
from .losses import Divergence
from .modelio import Teacher, load_merged
from .objectives import Ctx, opd_divergence, sequence_logprob


def load_ctx(spec: str, chunk: int = 512) -> Ctx:
    model, tok, _ = load_merged(spec)
    model.eval()
    return Ctx(model, Encoder(tok), torch.device("cpu"), chunk)


@torch.no_grad()
def decision_logprob(ctx: Ctx, messages: list[dict[str, Any]], decision: str) -> float:
    """Token-mean log-likelihood of `decision` (reply + end-of-turn) given the context."""
    mean_lp, _ = sequence_logprob(ctx, [(ctx.enc.prompt(messages), ctx.enc.reply(decision))])
    return float(mean_lp[0])


@torch.no_grad()
def opd_gap(student: Ctx, teacher_model: Any, items: list[Item], replies: list[str],
            kind: Divergence = "reverse_kl") -> float:
    """Mean over `items` of the token-mean divergence between student(x) and teacher(x ⊕ hint) along
    the given fixed replies (one per item)."""
    ids = [student.enc.reply(r) for r in replies]
    per, _ = opd_divergence(student, Teacher(student.model, teacher_model), items, ids, kind)
    return float(per.mean())
