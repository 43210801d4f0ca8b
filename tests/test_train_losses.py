"""Numerical checks of the OPOD losses on a tiny random Llama model (no weights needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "train"))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402

from porchestra.train.data import Encoder, Item, pad_batch  # noqa: E402
from porchestra.train.losses import (  # noqa: E402
    IGNORE, divergence_terms, per_sequence_mean, select_supervised, token_divergence, token_logprobs)
from porchestra.train.modelio import Teacher, body_and_head, hidden_states  # noqa: E402
from porchestra.train.objectives import Ctx, OPODSettings, GenSettings, likelihood_loss, opd_divergence, \
    opod_loss  # noqa: E402

V = 97


def _batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, V, (3, 12), generator=g)
    att = torch.ones_like(ids)
    labels = ids.clone()
    labels[:, :5] = IGNORE  # prompt
    labels[1, 9:] = IGNORE  # padding of row 1
    att[1, 9:] = 0
    labels[2, :8] = IGNORE
    return {"input_ids": ids, "attention_mask": att, "labels": labels}


@pytest.fixture(scope="module")
def pair():
    return tiny_model(V, seed=0), tiny_model(V, seed=1)


def _full_logprobs(model, batch):
    return F.log_softmax(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float(), -1)


@pytest.mark.parametrize("kind", ["reverse_kl", "forward_kl", "jsd"])
def test_chunked_divergence_equals_full_vocabulary_sum_and_grad(pair, kind):
    student, teacher = pair
    batch = _batch()
    sel = select_supervised(hidden_states(student, batch), batch["labels"])
    with torch.no_grad():
        t_sel = select_supervised(hidden_states(teacher, batch), batch["labels"])
    _, s_head = body_and_head(student)
    _, t_head = body_and_head(teacher)
    chunked = token_divergence(sel, t_sel.hidden, s_head, t_head, kind, chunk=3)
    chunked.mean().backward()
    g_chunked = [p.grad.clone() for p in student.parameters()]
    student.zero_grad()

    ls = _full_logprobs(student, batch)[:, :-1]
    with torch.no_grad():
        lt = _full_logprobs(teacher, batch)[:, :-1]
    mask = batch["labels"][:, 1:] != IGNORE
    ps, pt = ls.exp(), lt.exp()
    if kind == "reverse_kl":
        brute = (ps * (ls - lt)).sum(-1)
    elif kind == "forward_kl":  # F.kl_div(input=log q, target=p) = Σ p (log p − log q) = KL(teacher ‖ student)
        brute = F.kl_div(ls, lt, log_target=True, reduction="none").sum(-1)
    else:
        m = 0.5 * (ps + pt)
        brute = 0.5 * (ps * (ps / m).log()).sum(-1) + 0.5 * (pt * (pt / m).log()).sum(-1)
    brute = brute[mask]
    assert chunked.shape == brute.shape == (int(mask.sum()),)
    torch.testing.assert_close(chunked, brute, rtol=1e-5, atol=1e-6)
    brute.mean().backward()
    for a, p in zip(g_chunked, student.parameters()):
        torch.testing.assert_close(a, p.grad, rtol=1e-4, atol=1e-6)
    student.zero_grad()
    assert all(p.grad is None for p in teacher.parameters())


def test_divergences_are_zero_for_equal_distributions_and_jsd_is_symmetric():
    a = F.log_softmax(torch.randn(4, 11), -1)
    b = F.log_softmax(torch.randn(4, 11), -1)
    for kind in ("reverse_kl", "forward_kl", "jsd"):
        torch.testing.assert_close(divergence_terms(a, a, kind), torch.zeros(4), atol=1e-6, rtol=0)
    torch.testing.assert_close(divergence_terms(a, b, "jsd"), divergence_terms(b, a, "jsd"))
    torch.testing.assert_close(divergence_terms(a, b, "reverse_kl"), divergence_terms(b, a, "forward_kl"))
    assert (divergence_terms(a, b, "jsd") <= torch.log(torch.tensor(2.0)) + 1e-6).all()


def test_token_logprobs_match_cross_entropy_and_mask_excludes_prompt_and_padding(pair):
    student, _ = pair
    batch = _batch()
    sel = select_supervised(hidden_states(student, batch), batch["labels"])
    # exactly the non-prompt, non-padding next-token targets are selected
    assert sel.targets.numel() == int((batch["labels"][:, 1:] != IGNORE).sum()) == 7 + 4 + 4
    lp = token_logprobs(sel, body_and_head(student)[1], chunk=4)
    logits = student(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, V), batch["labels"][:, 1:].reshape(-1),
                         ignore_index=IGNORE, reduction="none").view(3, -1)
    mask = batch["labels"][:, 1:] != IGNORE
    torch.testing.assert_close(-lp, ce[mask], rtol=1e-5, atol=1e-6)
    per_seq, counts = per_sequence_mean(-lp, sel.seq, sel.n_seqs)
    assert counts.tolist() == [7, 4, 4]
    torch.testing.assert_close(per_seq[1], ce[1][mask[1]].mean())


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def _items():
    ctx = [{"role": "system", "content": "You are the orchestrator."},
           {"role": "user", "content": "Compute the sum of the numbers in data.csv."}]
    return [Item("a", ctx, '{"action": "delegate_task"}', 1.0),
            Item("b", ctx[:1] + [{"role": "user", "content": "sum data.csv"}], '{"action": "complete"}', 1.0,
                 hint="include execute_python", hint_slot={"message_index": 1, "offset": 3}),
            Item("c", ctx, '{"params": {"tools": ["read_file"]}}', 0.0, hint="use execute_python")]


def test_padding_and_prompt_tokens_do_not_change_the_likelihood_loss(tok):
    model = tiny_model(len(tok))
    enc = Encoder(tok)
    pairs = [(enc.prompt(it.messages), enc.reply(it.decision)) for it in _items()]
    a = pad_batch(pairs, enc.pad_id)
    b = pad_batch(pairs, pad_id=7)  # other padding token values
    assert torch.equal(a["labels"], b["labels"])
    assert int((a["labels"] != IGNORE).sum()) == sum(len(r) for _, r in pairs)
    for i, (p, r) in enumerate(pairs):
        assert (a["labels"][i, :len(p)] == IGNORE).all() and (a["labels"][i, len(p) + len(r):] == IGNORE).all()
    _, head = body_and_head(model)
    la = token_logprobs(select_supervised(hidden_states(model, a), a["labels"]), head)
    lb = token_logprobs(select_supervised(hidden_states(model, b), b["labels"]), head)
    torch.testing.assert_close(la, lb, rtol=1e-5, atol=1e-6)


def test_lambda_zero_is_exactly_rwr_and_weights_follow_the_definition(tok):
    torch.manual_seed(0)
    model = tiny_model(len(tok))
    for p in model.parameters():
        p.requires_grad_(True)
    ctx = Ctx(model, Encoder(tok), torch.device("cpu"), chunk=5)
    items = _items()
    rwr, m = likelihood_loss(ctx, items)
    assert m["n_rwr"] == 2  # item c carries no RWR supervision (weight 0)
    total0, m0 = opod_loss(ctx, Teacher.frozen_from(model), items, OPODSettings(lam=0.0))
    assert torch.equal(total0, rwr) and m0["n_opd"] == 0
    # decision-level mean: each decision's token mean counts once, whatever its length
    nll = []
    for it in items[:2]:
        pr, rp = ctx.enc.prompt(it.messages), ctx.enc.reply(it.decision)
        logits = model(input_ids=torch.tensor([pr + rp])).logits[0, len(pr) - 1:-1]
        nll.append(F.cross_entropy(logits, torch.tensor(rp)))
    torch.testing.assert_close(rwr, torch.stack(nll).mean(), rtol=1e-5, atol=1e-6)
    # λ = 1 adds the OPD mean over the two flagged decisions only
    torch.manual_seed(3)
    total1, m1 = opod_loss(ctx, Teacher.frozen_from(model), items, OPODSettings(lam=1.0, gen=GenSettings(max_new_tokens=6)))
    assert m1["n_opd"] == 2 and m1["loss_opd"] >= 0
    torch.testing.assert_close(total1, rwr + m1["loss_opd"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("use_lora", [False, True])
def test_teacher_gets_no_gradient_and_stays_bit_identical(tok, use_lora):
    from peft import LoraConfig, get_peft_model

    model = tiny_model(len(tok))
    if use_lora:
        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
        # make the adapter non-zero so student and teacher differ
        for n, p in model.named_parameters():
            if "lora_B" in n:
                torch.nn.init.normal_(p, std=0.2)
    teacher = Teacher.frozen_from(model)
    frozen = teacher.copy_model if not use_lora else model.get_base_model()
    before = {n: p.detach().clone() for n, p in frozen.named_parameters() if "lora_" not in n}
    model.train()
    ctx = Ctx(model, Encoder(tok), torch.device("cpu"), chunk=4)
    items = [it for it in _items() if it.hint]
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    torch.manual_seed(0)
    replies = [[5, 6, 7, 3], [9, 3]]
    for _ in range(2):
        per, counts = opd_divergence(ctx, teacher, items, replies)
        assert (per > 0).all()
        per.mean().backward()
        for n, p in frozen.named_parameters():
            if "lora_" not in n:
                assert p.grad is None, n
        opt.step()
        opt.zero_grad()
    after = {n: p.detach() for n, p in frozen.named_parameters() if "lora_" not in n}
    assert all(torch.equal(before[n], after[n]) for n in before)
    if not use_lora:  # the student did move
        assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), teacher.copy_model.parameters()))


def test_opod_gradients_equal_those_of_the_joint_loss(tok):
    """opod_loss backpropagates the RWR term early (memory); the total gradient must be unchanged."""
    from porchestra.train.objectives import sample_replies

    model = tiny_model(len(tok))
    ctx = Ctx(model, Encoder(tok), torch.device("cpu"), chunk=5)
    items, cfg = _items(), OPODSettings(lam=0.7, gen=GenSettings(max_new_tokens=6))
    teacher = Teacher.frozen_from(model)
    torch.manual_seed(5)
    loss, m = opod_loss(ctx, teacher, items, cfg)
    loss.backward()
    early = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch.manual_seed(5)
    rwr, _ = likelihood_loss(ctx, items)
    flagged = [it for it in items if it.hint]
    replies = sample_replies(model, ctx.enc, [ctx.enc.prompt(it.messages) for it in flagged], cfg.gen)
    per, _ = opd_divergence(ctx, teacher, flagged, replies)
    (rwr + 0.7 * per.mean()).backward()
    for a, p in zip(early, model.parameters()):
        torch.testing.assert_close(a, p.grad, rtol=1e-5, atol=1e-7)
    assert m["n_rwr"] == 2 and m["n_opd"] == 2
