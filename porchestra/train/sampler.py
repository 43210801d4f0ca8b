"""Where OPD and DA-GRPO get their student samples: in the training process, or from a generation server.

A sampler returns token ids (and, when the server reports them, the log-probabilities it sampled
with): the loss scores exactly these ids, so there is no detokenise/retokenise drift.

- `InProcessSampler` (default): `model.generate` on the current weights (TRL's
  `unwrap_model_for_generation` gathers ZeRO-3 weights around it).
- `ServerSampler`: an OpenAI-compatible `/v1/completions` endpoint that accepts token-id prompts
  and returns token ids: vLLM (`return_token_ids` / `return_tokens_as_token_ids`, runtime LoRA
  loading with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True) or porchestra's own
  `python -m porchestra.train.sample_server`. Every `sync_every` optimizer steps rank 0 saves the
  current adapter (or, for full fine-tuning, the weights) under `sync_dir` and tells the server to
  load it; samples are then requested from that version.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from pydantic import BaseModel

from .data import Encoder, left_pad
from .modelio import is_peft


class GenSettings(BaseModel):
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0


@dataclass
class Sample:
    tokens: list[int]
    logprobs: list[float] | None = None  # the server's log π(token) (raw, temperature 1), when reported


class Sampler(Protocol):
    def sync(self, ctx: Any, step: int) -> None: ...

    def sample(self, ctx: Any, prompts: list[list[int]], gen: GenSettings, num_return: int = 1,
               seeds: list[int] | None = None) -> list[Sample]: ...


def _cut(row: list[int], eos: int) -> list[int]:
    cut = row.index(eos) + 1 if eos in row else len(row)
    return row[:cut] or [eos]


@torch.no_grad()
def sample_replies(model: Any, enc: Encoder, prompts: list[list[int]], gen: GenSettings,
                   num_return: int = 1, synced: bool = False) -> list[list[int]]:
    """Sampled replies (token ids, cut after the first end-of-turn token), `num_return` per prompt,
    grouped prompt by prompt. `synced`: keep all ranks generating in lockstep (sharded weights)."""
    was_training = model.training
    model.eval()
    try:
        batch = left_pad(prompts, enc.pad_id, next(model.parameters()).device)
        extra = {"synced_gpus": True} if synced else {}
        out = model.generate(**batch, do_sample=True, temperature=gen.temperature, top_p=gen.top_p,
                             top_k=0, max_new_tokens=gen.max_new_tokens, num_return_sequences=num_return,
                             pad_token_id=enc.pad_id, eos_token_id=enc.eos_id, **extra)
    finally:
        model.train(was_training)
    return [_cut(row, enc.eos_id) for row in out[:, batch["input_ids"].shape[1]:].tolist()]


class InProcessSampler:
    """model.generate in the trainer. With `seeds`, each prompt is sampled alone from its own seed, so
    a decision's sample does not depend on how the global batch was split across ranks."""

    def sync(self, ctx: Any, step: int) -> None:
        return None

    def sample(self, ctx: Any, prompts: list[list[int]], gen: GenSettings, num_return: int = 1,
               seeds: list[int] | None = None) -> list[Sample]:
        if not prompts:
            return []
        synced = ctx.par.synced_generation
        with ctx.par.generation_model(ctx.model) as lm:
            if seeds is None:
                return [Sample(t) for t in sample_replies(lm, ctx.enc, prompts, gen, num_return, synced)]
            if synced:
                raise ValueError("--sample-seed decision: not available with sharded weights (FSDP, ZeRO-3)")
            out: list[Sample] = []
            devices = [ctx.device] if ctx.device.type == "cuda" else []
            for p, s in zip(prompts, seeds):
                with torch.random.fork_rng(devices=devices):
                    torch.manual_seed(s)
                    out += [Sample(t) for t in sample_replies(lm, ctx.enc, [p], gen, num_return)]
            return out


class ServerSampler:
    """Samples from an OpenAI-compatible completions server that is kept in step with the trainer."""

    def __init__(self, base_url: str, model: str = "student", sync_every: int = 1, sync_dir: str | Path = "",
                 api_key: str | None = None, timeout: float = 600.0):
        if sync_every < 1:
            raise ValueError("--sync-every must be >= 1")
        self.base_url = base_url.rstrip("/")
        self.model, self.sync_every, self.sync_dir = model, sync_every, Path(sync_dir)
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = timeout
        self.current = model
        self.synced: list[int] = []

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        import httpx

        r = httpx.post(f"{self.base_url}{path}", json=body, headers=self.headers, timeout=self.timeout)
        if r.status_code >= 400:
            raise RuntimeError(f"sampler server {self.base_url}{path}: HTTP {r.status_code}: {r.text[:300]}")
        return r.json() if r.content else None

    def sync(self, ctx: Any, step: int) -> None:
        """At steps 0, k, 2k, ...: publish the current weights (rank 0) and sample from them (all ranks)."""
        if step % self.sync_every:
            return
        peft = is_peft(ctx.model)
        name = f"{self.model}-step{step}"
        if ctx.par.rank == 0:
            dest = self.sync_dir / name
            shutil.rmtree(dest, ignore_errors=True)
            ctx.model.save_pretrained(dest)
            if peft:
                self._post("/load_lora_adapter", {"lora_name": name, "lora_path": str(dest.resolve())})
            else:  # porchestra's sample server; vLLM has no OpenAI-style full-weight update endpoint
                ctx.enc.tok.save_pretrained(dest)
                self._post("/load_weights", {"path": str(dest.resolve())})
            for old in self.synced[:-1]:  # the server may still read the previous version
                shutil.rmtree(self.sync_dir / f"{self.model}-step{old}", ignore_errors=True)
        self.synced.append(step)
        ctx.par.barrier()
        self.current = name if peft else self.model

    def sample(self, ctx: Any, prompts: list[list[int]], gen: GenSettings, num_return: int = 1,
               seeds: list[int] | None = None) -> list[Sample]:
        if not prompts:
            return []
        body = {"model": self.current, "max_tokens": gen.max_new_tokens, "temperature": gen.temperature,
                "top_p": gen.top_p, "n": num_return, "logprobs": 0, "return_token_ids": True,
                "return_tokens_as_token_ids": True, "skip_special_tokens": False,
                "stop_token_ids": [ctx.enc.eos_id]}
        if seeds is None:
            groups = [self._post("/completions", {**body, "prompt": prompts})["choices"]]
        else:  # one request per prompt, each with its own seed
            groups = [self._post("/completions", {**body, "prompt": [p], "seed": s})["choices"]
                      for p, s in zip(prompts, seeds)]
        out: list[Sample] = []
        for choices in groups:
            out += [self._parse(c, ctx.enc.eos_id) for c in sorted(choices, key=lambda c: c["index"])]
        if len(out) != len(prompts) * num_return:
            raise RuntimeError(f"sampler server returned {len(out)} choices for {len(prompts)}×{num_return}")
        return out

    @staticmethod
    def _parse(choice: dict[str, Any], eos: int) -> Sample:
        lp = choice.get("logprobs") or {}
        ids = choice.get("token_ids")
        if ids is None:  # vLLM's return_tokens_as_token_ids spells each token "token_id:<id>"
            toks = lp.get("tokens")
            if toks is None:
                raise RuntimeError("sampler server returned no token ids (needs vLLM's return_token_ids or "
                                   "return_tokens_as_token_ids); refusing to re-tokenise the text")
            ids = [int(t.split(":", 1)[1]) for t in toks]
        ids = [int(t) for t in ids]
        logprobs = [float("nan") if x is None else float(x) for x in lp.get("token_logprobs") or []] or None
        if logprobs is not None and len(logprobs) != len(ids):
            logprobs = None
        tokens = _cut(ids, eos)
        if tokens[-1] != eos and choice.get("finish_reason") == "stop":
            tokens.append(eos)  # a server that strips the stop token: the loss still scores the end of turn
            if logprobs is not None:
                logprobs.append(math.nan)
        if logprobs is not None:
            logprobs = logprobs[:len(tokens)]
        return Sample(tokens, logprobs)


class TRLVLLMSampler:
    """vLLM through TRL's `VLLMClient` (trl.generation.vllm_client): samples from token-id prompts over
    vLLM's OpenAI API, and every `sync_every` steps rank 0 broadcasts the current weights over NCCL
    (vLLM's weight transfer; a LoRA adapter is merged for the transfer, then unmerged). Needs `vllm` on
    the trainer side, CUDA, and a server started with
    `VLLM_SERVER_DEV_MODE=1 vllm serve <SFT dir> --weight-transfer-config '{"backend": "nccl"}'`.
    Not yet run (no GPU in the sessions that wrote it); weights sharded by FSDP/ZeRO-3 are refused."""

    def __init__(self, base_url: str, sync_every: int = 1):
        if sync_every < 1:
            raise ValueError("--sync-every must be >= 1")
        self.base_url, self.sync_every = base_url.rstrip("/").removesuffix("/v1"), sync_every
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            from trl.generation.vllm_client import VLLMClient

            self._client = VLLMClient(base_url=self.base_url, connection_timeout=120)
        return self._client

    def sync(self, ctx: Any, step: int) -> None:
        if step % self.sync_every:
            return
        if ctx.par.synced_generation:
            raise ValueError("--sampler trl-vllm: weights sharded by FSDP/ZeRO-3 are not supported; use DDP")
        if ctx.par.rank == 0:
            c = self.client()
            if c.communicator is None:
                c.init_communicator(device=ctx.device)
            if is_peft(ctx.model):
                ctx.model.merge_adapter()
                try:
                    params = [(n.replace(".base_layer", ""), p.data) for n, p in
                              ctx.model.get_base_model().named_parameters() if "lora_" not in n]
                    with c.weight_update():
                        for name, data in params:
                            c.update_named_param(name, data)
                finally:
                    ctx.model.unmerge_adapter()
            else:
                c.update_model_params(ctx.model)
            c.reset_prefix_cache()
        ctx.par.barrier()

    def sample(self, ctx: Any, prompts: list[list[int]], gen: GenSettings, num_return: int = 1,
               seeds: list[int] | None = None) -> list[Sample]:
        if not prompts:
            return []
        kw = {"stop_token_ids": [ctx.enc.eos_id], "skip_special_tokens": False}
        groups = [(prompts, None)] if seeds is None else [([p], s) for p, s in zip(prompts, seeds)]
        out: list[Sample] = []
        for ps, seed in groups:
            res = self.client().generate(ps, n=num_return, temperature=gen.temperature, top_p=gen.top_p,
                                         max_tokens=gen.max_new_tokens, logprobs=0,
                                         generation_kwargs={**kw, **({"seed": seed} if seed is not None else {})})
            lps = res.get("logprobs") or [None] * len(res["completion_ids"])
            for ids, lp in zip(res["completion_ids"], lps):
                tokens = _cut([int(t) for t in ids], ctx.enc.eos_id)
                flat = [float(x[0]) for x in lp][:len(tokens)] if lp else None
                if flat is not None and len(flat) < len(tokens):
                    flat += [math.nan] * (len(tokens) - len(flat))
                out.append(Sample(tokens, flat))
        return out
