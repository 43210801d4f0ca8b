"""Training items from decision records, tokenisation and padding.

A decision is trained as `chat_template(context, add_generation_prompt=True)` followed by the reply
and the end-of-turn token. Prompt and reply are tokenised separately and concatenated, so the
supervised tokens are exactly the reply's (no merge across the boundary); labels are IGNORE on
prompt and padding positions.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import torch

from .attribution import Attribution
from .hints import with_hint
from .losses import IGNORE
from .records import DecisionRecord


@dataclass
class Item:
    """One decision context with the supervision it carries."""

    decision_id: str
    messages: list[dict[str, Any]]
    decision: str = ""  # stored reply: the likelihood target (SFT/RWR) or the reference (DA-GRPO)
    weight: float = 0.0  # likelihood weight; 0 = no likelihood supervision
    hint: str | None = None  # OPD supervision when set
    hint_slot: dict[str, int] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    # A whole append-only conversation (a worker's turns): `messages` ends with the last reply and
    # every assistant turn is supervised -- one forward instead of one per turn, same targets.
    conversation: bool = False

    @property
    def teacher_messages(self) -> list[dict[str, Any]]:
        assert self.hint is not None
        return with_hint(self.messages, self.hint_slot, self.hint)


def sft_items(records: list[DecisionRecord]) -> list[Item]:
    """Every structurally valid decision, successful or failed trajectory alike, weight 1."""
    return [Item(r.decision_id, r.messages, r.decision, 1.0, meta={"type": r.decision_type})
            for r in records if r.valid and r.messages]


def rwr_weight(rec: DecisionRecord, reward: str = "binary") -> float:
    """binary: 1 for decisions of successful trajectories, else 0 (= not supervised).
    score: the trajectory's score in [0, 1] (falls back to the binary reward)."""
    if not rec.valid:
        return 0.0
    if reward == "score" and rec.score is not None:
        return max(0.0, float(rec.score))
    return 1.0 if rec.success else 0.0


def opod_items(records: list[DecisionRecord], attributions: dict[str, Attribution] | None,
               reward: str = "binary", with_opd: bool = True) -> list[Item]:
    """RWR and OPD supervision paired by decision context. Decisions with neither are dropped; with
    `with_opd=False` (λ = 0) only RWR-supervised decisions remain, so training equals RWR exactly."""
    items = []
    for r in records:
        if not r.messages:
            continue
        w = rwr_weight(r, reward)
        a = (attributions or {}).get(r.decision_id)
        hint = a.hint if (with_opd and a is not None and a.needs_repair and a.hint) else None
        if w > 0 or hint:
            items.append(Item(r.decision_id, r.messages, r.decision, w, hint, r.hint_slot,
                              meta={"type": r.decision_type}))
    return items


class Encoder:
    """Turns chat messages and replies into token ids with the tokenizer's chat template."""

    def __init__(self, tokenizer: Any, max_length: int = 4096):
        self.tok = tokenizer
        self.max_length = max_length
        eos = tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the tokenizer has no eos token: cannot mark the end of a decision")
        self.eos_id = int(eos)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos)

    def prompt(self, messages: list[dict[str, Any]]) -> list[int]:
        text = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def reply(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False)["input_ids"]) + [self.eos_id]

    def supervised(self, item: Item) -> tuple[list[int], list[int]]:
        """(token ids, labels) of the item's likelihood term: the prompt then the reply (labels on
        the reply and its end-of-turn token), or for a conversation item the whole chat with labels
        on every assistant turn's content and the end-of-turn token that closes it."""
        if not item.conversation:
            p, r = self.prompt(item.messages), self.reply(item.decision)
            return p + r, [IGNORE] * len(p) + r
        text = self.tok.apply_chat_template(item.messages, tokenize=False)
        enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = list(enc["input_ids"]), enc["offset_mapping"]
        spans, cursor = [], 0
        for m in item.messages:
            content = m.get("content") or ""
            if m.get("role") == "assistant" and content:
                at = text.find(content, cursor)
                if at < 0:
                    raise ValueError(f"{item.decision_id}: the chat template does not keep an assistant "
                                     "turn verbatim; train it turn by turn instead")
                spans.append((at, at + len(content)))
                cursor = at + len(content)
        labels = [IGNORE] * len(ids)
        for a, b in spans:
            last = None
            for k, (s, e) in enumerate(offsets):
                if s < b and e > a:
                    labels[k], last = ids[k], k
            if last is not None and last + 1 < len(ids) and ids[last + 1] == self.eos_id:
                labels[last + 1] = self.eos_id
        return ids, labels

    def fits(self, item: Item, gen_tokens: int = 0) -> bool:
        """Whether every sequence this item produces stays within `max_length` tokens: the stored
        reply (likelihood terms) and, with a hint, the teacher prompt plus a sampled reply."""
        if item.conversation:
            return len(self.supervised(item)[0]) <= self.max_length
        if item.weight > 0 and len(self.prompt(item.messages)) + len(self.reply(item.decision)) > self.max_length:
            return False
        if item.hint and len(self.prompt(item.teacher_messages)) + gen_tokens > self.max_length:
            return False
        return len(self.prompt(item.messages)) + gen_tokens <= self.max_length


def pad_batch(seqs: list[tuple[list[int], list[int]]], pad_id: int, device: Any = None) -> dict[str, torch.Tensor]:
    """Right-padded input_ids / attention_mask / labels for (prompt, reply) pairs; labels only on
    the reply tokens. A reply token equal to `pad_id` is still supervised (labels are built from
    positions, not from token values)."""
    return pad_labeled([(p + r, [IGNORE] * len(p) + list(r)) for p, r in seqs], pad_id, device)


def pad_labeled(seqs: list[tuple[list[int], list[int]]], pad_id: int, device: Any = None) -> dict[str, torch.Tensor]:
    """Right-padded input_ids / attention_mask / labels for (ids, labels) sequences."""
    width = max(len(ids) for ids, _ in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    att = torch.zeros((len(seqs), width), dtype=torch.long)
    lab = torch.full((len(seqs), width), IGNORE, dtype=torch.long)
    for i, (x, y) in enumerate(seqs):
        n = len(x)
        ids[i, :n] = torch.tensor(x)
        att[i, :n] = 1
        lab[i, :n] = torch.tensor(y)
    out = {"input_ids": ids, "attention_mask": att, "labels": lab}
    return {k: v.to(device) for k, v in out.items()} if device is not None else out


def left_pad(prompts: list[list[int]], pad_id: int, device: Any = None) -> dict[str, torch.Tensor]:
    """Left-padded prompts for batched generation."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    att = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        att[i, width - len(p):] = 1
    return {"input_ids": ids.to(device), "attention_mask": att.to(device)}


def epoch_order(n: int, batch_size: int, epochs: int, seed: int) -> list[list[int]]:
    """Deterministic minibatches over `epochs` shuffles: a resumed run replays the same order."""
    batches: list[list[int]] = []
    for e in range(epochs):
        order = list(range(n))
        random.Random(seed * 1000003 + e).shuffle(order)
        batches.extend(order[i:i + batch_size] for i in range(0, n, batch_size))
    return batches
