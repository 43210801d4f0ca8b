"""DA-GRPO baseline: K candidate decisions per expert context, scored by an LLM rubric judge,
group-relative advantages, one policy-gradient update.

    r_i   = mean of the four rubric scores / 10  (format, action_validity, tool_reasonableness,
            decision_quality; an unparseable judgement scores 0 and is counted)
    A_i   = (r_i − mean_group r) / (std_group r + ε)        (0 for a group whose rewards are all equal)
    L     = − mean_groups mean_i A_i · mean_k log π_θ(y_i,k | x, y_i,<k)

Each minibatch is sampled from the current policy and used for one update, so the PPO ratio is 1
and clipping is inactive; no KL penalty to a reference (β = 0).
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import BaseModel

from ..models.base import Model, ModelError
from ..models.gateway import Gateway
from ..parsing import extract_json_objects
from ..prompting import PromptSet
from .data import Item
from .modelio import Teacher
from .objectives import Ctx, GenSettings, decision_mean, sequence_logprob

CRITERIA = ("format", "action_validity", "tool_reasonableness", "decision_quality")


class GRPOSettings(BaseModel):
    k: int = 8
    gen: GenSettings = GenSettings()
    eps: float = 1e-4


def parse_rubric(text: str | None) -> tuple[float, bool]:
    """(reward in [0, 1], parsed?). Missing criteria count 0."""
    objs = [o for o in extract_json_objects(text or "") if any(c in o for c in CRITERIA)]
    if not objs:
        return 0.0, False
    vals = []
    for c in CRITERIA:
        v = objs[0].get(c, 0)
        try:
            vals.append(min(10.0, max(0.0, float(v))))
        except (TypeError, ValueError):
            vals.append(0.0)
    return sum(vals) / (10.0 * len(CRITERIA)), True


class RubricJudge:
    """Scores candidate decisions through the model layer (every call logged by the gateway)."""

    def __init__(self, model: Model, gateway: Gateway, max_tokens: int = 128):
        self.model, self.gateway, self.max_tokens = model, gateway, max_tokens
        self.prompts = PromptSet("attribution")
        self.unparsed = 0

    def score(self, item: Item, candidate: str) -> float:
        context = "\n\n".join(f"[{m.get('role')}]\n{m.get('content')}" for m in item.messages)
        messages = [{"role": "system", "content": self.prompts.render("rubric_system.j2")},
                    {"role": "user", "content": self.prompts.render(
                        "rubric_user.j2", context=context, reference=item.decision, candidate=candidate)}]
        try:
            call = self.gateway.call(self.model, messages, role="judge", agent_id="rubric_judge",
                                     component="judge", max_tokens=self.max_tokens, decision_id=item.decision_id)
        except ModelError:
            self.unparsed += 1
            return 0.0
        reward, ok = parse_rubric(call.text)
        self.unparsed += 0 if ok else 1
        return reward


def group_advantages(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """rewards (G, K) → group-normalised advantages (G, K)."""
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True, unbiased=False)
    adv = (rewards - mean) / (std + eps)
    return torch.where(std > 0, adv, torch.zeros_like(adv))


def dagrpo_loss(ctx: Ctx, judge: RubricJudge, items: list[Item], cfg: GRPOSettings
                ) -> tuple[torch.Tensor, dict[str, Any]]:
    n = len(items)
    prompts = [ctx.enc.prompt(it.messages) for it in items]
    if not prompts and ctx.par.synced_generation:  # sharded weights: every rank joins every generate
        ctx.sampler.sample(ctx, [[ctx.enc.eos_id]], cfg.gen)
    replies = [s.tokens for s in ctx.sampler.sample(ctx, prompts, cfg.gen, num_return=cfg.k, seeds=ctx.seeds(items))]
    texts = [ctx.enc.tok.decode(r, skip_special_tokens=True) for r in replies]
    rewards = torch.tensor([judge.score(items[i // cfg.k], t) for i, t in enumerate(texts)],
                           dtype=torch.float32).view(n, cfg.k)
    adv = group_advantages(rewards, cfg.eps).view(-1).to(ctx.device)
    pairs = [(prompts[i // cfg.k], r) for i, r in enumerate(replies)]
    if not pairs:  # data parallel: a rank without groups still runs the forward (weight 0)
        pairs, adv = [([ctx.enc.pad_id], [ctx.enc.pad_id])] * cfg.k, torch.zeros(cfg.k, device=ctx.device)
    mean_lp, counts = sequence_logprob(ctx, pairs)
    groups = max(n, 1)
    per_group = (-(adv * mean_lp)).view(groups, cfg.k).mean(dim=1)
    weights = torch.ones(groups, device=ctx.device) * (1.0 if n else 0.0)
    loss = decision_mean(ctx, per_group, weights, counts.view(groups, cfg.k).sum(dim=1))
    metrics = {"loss_pg": float(loss.item()), "n_groups": n, "tokens_pg": int(counts.sum().item()) if n else 0,
               "judge_unparsed": judge.unparsed}
    if n:  # per-rank statistics: a rank without groups reports none (the metrics row averages the others)
        metrics.update(reward_mean=float(rewards.mean()), reward_std=float(rewards.std(unbiased=False)))
    return loss, metrics


def make_objective(judge: RubricJudge, cfg: GRPOSettings):
    def objective(ctx: Ctx, teacher: Teacher | None, items: list[Item]):
        return dagrpo_loss(ctx, judge, items, cfg)
    return objective
