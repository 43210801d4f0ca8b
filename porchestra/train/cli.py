"""CLI verbs of the training side, mounted by porchestra/cli.py:

    porchestra export records|sft RUN_DIR... --out FILE
    porchestra attribute RUN_DIR... --model SPEC --out FILE
    porchestra train sft|rwr|opod|dagrpo DATA... --model SPEC --out DIR

Bad input exits with code 2 and names the bad option before anything is written. Heavy imports
(torch, transformers) happen inside the commands only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer
from rich.console import Console

err = Console(stderr=True, highlight=False)
out_console = Console(highlight=False)

export_app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                         help="Export decision records / SFT data from event logs.")
train_app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                        help="Train an orchestrator: sft, rwr, opod, dagrpo.")


def fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


def _guard(fn: Callable[[], Any]) -> Any:
    from ..models.registry import ModelSpecError
    from .records import RecordError

    try:
        return fn()
    # modelio.BaseModelError is a ValueError: not imported here, since modelio imports torch and
    # `export records` / `export sft` must work without it
    except (RecordError, ModelSpecError, ValueError, FileNotFoundError) as e:
        fail(str(e))


def _train(*args: Any, **kw: Any) -> None:
    """run_training with its input errors (raised before OUT is written) as exit code 2."""
    from .trainer import TrainInputError, run_training

    try:
        run_training(*args, **kw)
    except TrainInputError as e:
        fail(str(e))


# --- export ------------------------------------------------------------------------------------

RUN_DIRS = typer.Argument(..., help="Run dirs, eval dirs (searched for events.jsonl) or events.jsonl files.")


@export_app.command("records")
def export_records(run_dirs: List[Path] = RUN_DIRS,
                   out: Path = typer.Option(..., "--out", help="Output JSONL (porchestra.decision.v1).")) -> None:
    """One record per orchestrator decision (context, reply, type, reward, trace link)."""
    from .jsonl import write_jsonl_atomic
    from .records import collect_records

    records = _guard(lambda: collect_records(run_dirs))
    n = write_jsonl_atomic(out, records)
    out_console.print(f"wrote {n} decision records to {out}")


@export_app.command("sft")
def export_sft(run_dirs: List[Path] = RUN_DIRS,
               out: Path = typer.Option(..., "--out", help="Output JSONL."),
               fmt: str = typer.Option("prompt-completion", "--format",
                                       help="prompt-completion (TRL) | messages (LLaMA-Factory sharegpt/openai)."),
               types: str = typer.Option("", "--types", help="Comma-separated decision types to keep "
                                         "(delegate,revise,end,terminate,other); default all."),
               role: str = typer.Option("orchestrator", "--role", help="orchestrator: one example per "
                                        "decision | worker: one example per worker conversation, every "
                                        "turn supervised (messages format, metadata.all_turns).")) -> None:
    """Structurally valid decisions of expert runs, successful and failed, as SFT examples."""
    from .jsonl import write_jsonl_atomic
    from .records import collect_records, sft_records, to_sft_example

    if fmt not in ("prompt-completion", "messages"):
        fail(f"--format: unknown SFT format {fmt!r} (prompt-completion | messages)")
    if role not in ("orchestrator", "worker"):
        fail(f"--role: unknown role {role!r} (orchestrator | worker)")
    if role == "worker":
        from .conversations import worker_conversations

        if types:
            fail("--types: applies to orchestrator decisions, not to --role worker")
        rows = _guard(lambda: list(worker_conversations(run_dirs)))
        n = write_jsonl_atomic(out, rows)
        out_console.print(f"wrote {n} worker conversations ({sum(r['metadata']['turns'] for r in rows)} turns) "
                          f"to {out}")
        return
    keep = {t.strip() for t in types.split(",") if t.strip()}
    bad = keep - {"delegate", "revise", "end", "terminate", "other"}
    if bad:
        fail(f"--types: unknown decision type(s) {sorted(bad)}")
    records = [r for r in sft_records(_guard(lambda: collect_records(run_dirs)))
               if not keep or r.decision_type in keep]
    n = write_jsonl_atomic(out, (to_sft_example(r, fmt) for r in records))
    out_console.print(f"wrote {n} SFT examples to {out}")


# --- attribute ---------------------------------------------------------------------------------

CONFIG = typer.Option(None, "--config", "-c", help="YAML run config (as for run/eval): the role's model "
                      "(attributor_model / judge_model) and model_options.<role> over model_options.default "
                      "(base_url, api_key_env, sampling, timeouts, retries); flags win.")


def _role_model(role: str, flag: str, spec: Optional[str], config: Optional[Path], base_url: Optional[str],
                api_key_env: Optional[str]) -> tuple[Any, Any]:
    """(the model serving `role`, its options), built by the model layer's get_model from the config
    file with the flags over it: the same path as run/eval, so model_options.<role> applies."""
    from ..config import load_config, with_model_options
    from ..models.registry import ModelSpecError, get_model, parse_spec

    if spec is not None:
        try:
            parse_spec(spec)
        except ModelSpecError as e:
            fail(f"{flag}: {e}")
    cfg = _guard(lambda: load_config(config, {f"{role}_model": spec}))
    flags = {"base_url": base_url, "api_key_env": api_key_env}
    cfg = _guard(lambda: with_model_options(cfg, {role: flags}, "flags"))
    if getattr(cfg, f"{role}_model") is None:
        fail(f"{flag}: no {role} model: give {flag} or set {role}_model in the config (-c)")
    return _guard(lambda: get_model(role, cfg)), cfg.options_for(role)


def attribute_cmd(run_dirs: List[Path] = RUN_DIRS,
                  model: Optional[str] = typer.Option(None, "--model", help="Attributor model spec, a frozen base "
                                                      "model (default: the config's attributor_model)."),
                  out: Path = typer.Option(..., "--out", help="Output JSONL (porchestra.attribution.v1)."),
                  config: Optional[Path] = CONFIG,
                  base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint of "
                                                         "the attributor (over model_options.attributor.base_url)."),
                  api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="Name of the env var "
                                                            "holding the attributor's key (never the key itself)."),
                  max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Longest reply per "
                                                           "decision in tokens (default: model_options.attributor."
                                                           "max_tokens, else 256)."),
                  context_chars: int = typer.Option(16000, "--context-chars", min=500, help="Character budget of "
                                                    "the decision-time context shown (system prompt cut to a "
                                                    "quarter, then the latest messages)."),
                  trace_chars: int = typer.Option(12000, "--trace-chars", min=500, help="Character budget of the "
                                                  "worker trace after the decision (head quarter + tail, the gap "
                                                  "marked)."),
                  event_chars: int = typer.Option(1000, "--event-chars", min=100, help="Each trace event cut to "
                                                  "this many characters."),
                  rules: bool = typer.Option(False, "--rules", help="No model: the rule-based attributor "
                                             "(hints from the workers' revise requests, refused tools and "
                                             "rejected arguments; model 'rules:revise-requests').")) -> None:
    """Attribute delegation/revision decisions with the paper's F.3 generative reward model.
    Results are cached in OUT.cache.jsonl (reruns resume); LLM calls are logged to
    OUT's folder/attribution_events.jsonl."""
    from datetime import datetime, timezone

    from ..log.events import EventLog
    from ..models.gateway import Gateway
    from .attribution import Truncation, attribute
    from .records import find_event_logs

    _guard(lambda: find_event_logs(run_dirs))
    if rules:
        from .attribution_rules import rule_attributions

        if model:
            fail("--rules: takes no --model (the rule-based attributor uses none)")
        res = _guard(lambda: rule_attributions(run_dirs, out))
        out_console.print(f"attributed {len(res)} decisions by rules: {sum(r.needs_repair for r in res)} need "
                          f"repair; wrote {out}")
        return
    m, opts = _role_model("attributor", "--model", model, config, base_url, api_key_env)
    max_tokens = max_tokens or opts.max_tokens or 256
    run_id = "attribution-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    log = EventLog(out.parent / "attribution_events.jsonl", run_id, "attribution")
    try:
        res = attribute(run_dirs, m, Gateway(log), out,
                        Truncation(context_chars=context_chars, trace_chars=trace_chars, event_chars=event_chars),
                        max_tokens=max_tokens)
    finally:
        log.close()
    flagged = sum(r.needs_repair for r in res)
    by_status: dict[str, int] = {}
    for r in res:
        by_status[r.status] = by_status.get(r.status, 0) + 1
    out_console.print(f"attributed {len(res)} decisions: {flagged} need repair; status {by_status}; wrote {out}")


# --- train -------------------------------------------------------------------------------------

@train_app.callback()
def _train_setup() -> None:
    """Training processes need glibc malloc settings at start-up (see porchestra/train/malloc.py)."""
    from .malloc import reexec_with_malloc_env

    reexec_with_malloc_env()


def _settings(method: str, model: str, out: Path, **kw: Any):
    from .modelio import resolve_base_dir
    from .trainer import STATE, TrainSettings, latest_checkpoint

    _guard(lambda: resolve_base_dir(model))
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: exists and is not a directory")
    ckpt = latest_checkpoint(out) if out.is_dir() else None
    if ckpt is not None:
        prev = json.loads((ckpt / STATE).read_text()).get("method")
        if prev != method:
            fail(f"--out {out}: holds a {prev} run; use another directory for {method}")
    lora_cfg = {"r": kw.pop("lora_r"), "alpha": kw.pop("lora_alpha"), "dropout": kw.pop("lora_dropout")}
    return TrainSettings(method=method, model=model, out=str(out), lora_cfg=lora_cfg, **kw)


def _load_items(data: List[Path], kind: str, attributions: Optional[Path] = None, reward: str = "binary",
                with_opd: bool = True):
    from .data import opod_items, sft_items
    from .datasets import load_examples

    if not data:
        fail("DATA: give at least one records/SFT JSONL file, run dir or events.jsonl")
    records, examples = _guard(lambda: load_examples(data))
    if kind == "sft":
        items = sft_items(records) + examples
    else:
        if examples:
            fail("DATA: rwr/opod/dagrpo need decision records (export records) or run dirs, not SFT examples")
        atts = None
        if attributions is not None:
            from .attribution import read_attributions

            atts = _guard(lambda: read_attributions(attributions))
        items = sft_items(records) if kind == "dagrpo" else opod_items(records, atts, reward, with_opd)
    if not items:
        fail(f"DATA: no usable {kind} decisions in {', '.join(map(str, data))}")
    return items


PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show a progress bar (metrics.jsonl is written "
                        "either way).")
DATA = typer.Argument(..., help="Decision records (export records), SFT JSONL (sft only), run dirs or events.jsonl.")
MODEL = typer.Option("local:smollm2", "--model", help="Starting weights: local:smollm2, local:<dir>, <dir> "
                     "(HF checkpoint or PEFT adapter, merged).")
OUT = typer.Option(..., "--out", help="Output directory (checkpoints, metrics.jsonl, final/).")


def _train_opts() -> dict[str, tuple[Any, Any]]:
    return dict(
        lora=(bool, typer.Option(True, "--lora/--full", help="LoRA adapter (default) or full fine-tuning.")),
        lora_r=(int, typer.Option(16, "--lora-r", min=1, help="LoRA rank r (--lora only).")),
        lora_alpha=(int, typer.Option(32, "--lora-alpha", min=1, help="LoRA scale α: updates are scaled by "
                                      "α/r (--lora only).")),
        lora_dropout=(float, typer.Option(0.0, "--lora-dropout", min=0.0, max=0.9, help="Dropout on the LoRA "
                                          "layers' input (--lora only).")),
        lr=(float, typer.Option(1e-4, "--lr", min=0.0, help="Peak AdamW learning rate (linear warmup, then "
                                "linear decay to 0).")),
        epochs=(int, typer.Option(1, "--epochs", min=1, help="Passes over the data (--max-steps wins).")),
        max_steps=(Optional[int], typer.Option(None, "--max-steps", min=1, help="Stop after this many optimizer "
                                               "steps (default: --epochs passes).")),
        batch_size=(int, typer.Option(4, "--batch-size", min=1, help="Decisions per optimizer step, global: "
                                      "split across ranks under accelerate launch.")),
        max_length=(int, typer.Option(4096, "--max-length", min=16, help="Longest sequence in tokens (prompt, "
                                      "reply and sampled tokens); longer decisions are dropped and counted in "
                                      "OUT/train_config.json.")),
        chunk_size=(int, typer.Option(512, "--chunk-size", min=1, help="Tokens per vocabulary-projection chunk.")),
        bf16=(bool, typer.Option(False, "--bf16/--fp32", help="bf16 autocast (weights stay fp32).")),
        gradient_checkpointing=(bool, typer.Option(False, "--gradient-checkpointing/--no-gradient-checkpointing",
                                                   help="Recompute activations in the backward pass: less "
                                                   "memory, slower steps.")),
        save_every=(int, typer.Option(50, "--save-every", min=1, help="Save a resumable checkpoint every N "
                                      "optimizer steps and at the last (the newest 2 are kept).")),
        seed=(int, typer.Option(0, "--seed", help="Seeds data order, LoRA initialisation and sampling.")),
        warmup_steps=(int, typer.Option(0, "--warmup-steps", min=0, help="Optimizer steps of linear "
                                        "learning-rate warmup.")),
        threads=(Optional[int], typer.Option(None, "--threads", min=1, help="torch CPU threads (default: torch's).")),
    )


SAMPLER_OPTS: dict[str, tuple[Any, Any]] = {
    "sampler": (str, typer.Option("in-process", "--sampler", help="Student samples: in-process (model.generate) "
                                  "| server (OpenAI-compatible completions server: vLLM or porchestra's "
                                  "sample_server; adapters/weights synced through files) | trl-vllm (vLLM "
                                  "through TRL's VLLMClient, weights synced over NCCL; needs vllm + CUDA).")),
    "sampler_url": (Optional[str], typer.Option(None, "--sampler-url", help="Server base URL, e.g. "
                                                "http://127.0.0.1:8000/v1 (--sampler server).")),
    "sampler_model": (str, typer.Option("student", "--sampler-model", help="Served model name; synced adapters "
                                        "are named <name>-step<N>.")),
    "sync_every": (int, typer.Option(1, "--sync-every", min=1, help="Send the current adapter/weights to the "
                                     "server every N optimizer steps.")),
    "sampler_api_key_env": (Optional[str], typer.Option(None, "--sampler-api-key-env",
                                                        help="Env var holding the server's key.")),
    "sample_seed": (str, typer.Option("batch", "--sample-seed", help="batch (one RNG stream) | decision (each "
                                      "decision sampled from its own seed: independent of the rank split).")),
}


def _make_sampler(o: dict[str, Any], out: Path) -> Any:
    """The sampler named by --sampler (None = in-process); bad values exit 2 before OUT is written."""
    import os

    if o["sample_seed"] not in ("batch", "decision"):
        fail(f"--sample-seed: unknown {o['sample_seed']!r} (batch | decision)")
    if o["sampler"] == "in-process":
        return None
    if o["sampler"] not in ("server", "trl-vllm"):
        fail(f"--sampler: unknown {o['sampler']!r} (in-process | server | trl-vllm)")
    if not o["sampler_url"]:
        fail(f"--sampler-url: --sampler {o['sampler']} needs the server's base URL")
    from .sampler import ServerSampler, TRLVLLMSampler

    if o["sampler"] == "trl-vllm":
        return TRLVLLMSampler(o["sampler_url"], o["sync_every"])

    key = os.environ.get(o["sampler_api_key_env"]) if o["sampler_api_key_env"] else None
    return ServerSampler(o["sampler_url"], o["sampler_model"], o["sync_every"], out / "sampler_sync", api_key=key)


def _sampler_opts(kw: dict[str, Any]) -> dict[str, Any]:
    return _split(kw, ("sampler", "sampler_url", "sampler_model", "sync_every", "sampler_api_key_env"))


def _with_opts(extra: dict[str, tuple[Any, Any]]) -> Callable:
    """Attach the shared options to a command function by extending its signature (typer reads it)."""
    import inspect

    def deco(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        for name, (ann, default) in {**_train_opts(), **extra}.items():
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann))
        fn.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        return fn
    return deco


def _split(kw: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: kw.pop(k) for k in keys}


@train_app.command("sft")
@_with_opts({"progress": (bool, PROGRESS)})
def train_sft(data: List[Path] = DATA, model: str = MODEL, out: Path = OUT, **kw: Any) -> None:
    """Supervised fine-tuning: likelihood of the decisions (prompt tokens masked)."""
    from .objectives import likelihood_loss

    progress = kw.pop("progress")
    items = _load_items(data, "sft")
    cfg = _settings("sft", model, out, **kw)
    _train(cfg, items, lambda ctx, teacher, batch: likelihood_loss(ctx, batch), progress=progress)
    out_console.print(f"trained sft on {len(items)} decisions; policy in {out / 'final'}")


OPOD_OPTS: dict[str, tuple[Any, Any]] = {
    "attributions": (Optional[Path], typer.Option(None, "--attributions",
                                                  help="Attribution JSONL (porchestra attribute).")),
    "lam": (float, typer.Option(1.0, "--lam", min=0.0, help="OPD weight λ (0 = RWR).")),
    "rwr_weight": (float, typer.Option(1.0, "--rwr-weight", min=0.0, help="RWR weight ρ (0 = OPD only, "
                                       "the 'w/o RWR' ablation).")),
    "divergence": (str, typer.Option("reverse_kl", "--divergence", help="reverse_kl | forward_kl | jsd")),
    "jsd_beta": (float, typer.Option(0.5, "--jsd-beta", min=0.01, max=0.99, help="--divergence jsd: weight β "
                                     "of the student in the mixture M = β·student + (1−β)·teacher.")),
    "max_new_tokens": (int, typer.Option(256, "--max-new-tokens", min=1, help="Student sample length for OPD.")),
    "temperature": (float, typer.Option(1.0, "--temperature", min=0.01, help="Student sampling temperature "
                                        "for OPD.")),
    "reward": (str, typer.Option("binary", "--reward", help="binary (successful decisions) | score")),
    "progress": (bool, PROGRESS),
    **SAMPLER_OPTS,
}


def _opod(method: str, data: List[Path], model: str, out: Path, kw: dict[str, Any]) -> None:
    from .objectives import GenSettings, OPODSettings, opod_loss

    o = _split(kw, ("attributions", "lam", "rwr_weight", "divergence", "jsd_beta", "max_new_tokens", "temperature",
                    "reward", "progress"))
    so = _sampler_opts(kw)
    if o["divergence"] not in ("reverse_kl", "forward_kl", "jsd"):
        fail(f"--divergence: unknown {o['divergence']!r} (reverse_kl | forward_kl | jsd)")
    if o["reward"] not in ("binary", "score"):
        fail(f"--reward: unknown {o['reward']!r} (binary | score)")
    lam = 0.0 if method == "rwr" else o["lam"]
    if method == "opod" and lam > 0 and o["attributions"] is None:
        fail("--attributions: opod needs the attribution file (porchestra attribute), or use --lam 0")
    if lam == 0 and o["rwr_weight"] == 0:
        fail("--rwr-weight: 0 together with --lam 0 leaves nothing to train")
    sampler = _make_sampler({**so, "sample_seed": kw["sample_seed"]}, out)
    items = _load_items(data, method, o["attributions"], o["reward"], with_opd=lam > 0)
    if o["rwr_weight"] == 0:  # OPD only: decisions without a hint carry no supervision
        items = [it for it in items if it.hint] or fail("DATA: --rwr-weight 0 and no decision has a hint")
    cfg = _settings(method, model, out, **kw)
    settings = OPODSettings(lam=lam, rwr_weight=o["rwr_weight"], divergence=o["divergence"], jsd_beta=o["jsd_beta"],
                            gen=GenSettings(max_new_tokens=o["max_new_tokens"], temperature=o["temperature"]))
    _train(cfg, items, lambda ctx, teacher, batch: opod_loss(ctx, teacher, batch, settings),
           need_teacher=lam > 0, progress=o["progress"], gen_tokens=o["max_new_tokens"] if lam > 0 else 0,
           sampler=sampler)
    n_opd = sum(1 for it in items if it.hint)
    out_console.print(f"trained {method} on {len(items)} decisions ({n_opd} with hints); policy in {out / 'final'}")


@train_app.command("rwr")
@_with_opts({k: v for k, v in OPOD_OPTS.items() if k in ("reward", "progress")})
def train_rwr(data: List[Path] = DATA, model: str = MODEL, out: Path = OUT, **kw: Any) -> None:
    """Reward-weighted regression: likelihood of decisions from successful trajectories."""
    kw.update(attributions=None, lam=0.0, rwr_weight=1.0, divergence="reverse_kl", jsd_beta=0.5, max_new_tokens=1,
              temperature=1.0, sampler="in-process", sampler_url=None, sampler_model="student", sync_every=1,
              sampler_api_key_env=None, sample_seed="batch")
    _opod("rwr", data, model, out, kw)


@train_app.command("opod")
@_with_opts(OPOD_OPTS)
def train_opod(data: List[Path] = DATA, model: str = MODEL, out: Path = OUT, **kw: Any) -> None:
    """OPOD = RWR + λ·OPD (student samples at stored contexts; frozen SFT teacher sees the hint)."""
    _opod("opod", data, model, out, kw)


@train_app.command("dagrpo")
@_with_opts({
    "judge": (Optional[str], typer.Option(None, "--judge", help="Rubric judge model spec (default: the config's "
                                          "judge_model).")),
    "config": (Optional[Path], CONFIG),
    "judge_base_url": (Optional[str], typer.Option(None, "--judge-base-url", help="OpenAI-compatible endpoint of "
                                                   "the judge (over model_options.judge.base_url).")),
    "judge_api_key_env": (Optional[str], typer.Option(None, "--judge-api-key-env", help="Name of the env var "
                                                      "holding the judge's key (never the key itself).")),
    "k": (int, typer.Option(8, "--k", min=2, help="Candidates per expert context.")),
    "max_new_tokens": (int, typer.Option(256, "--max-new-tokens", min=1, help="Longest sampled candidate in "
                                         "tokens.")),
    "temperature": (float, typer.Option(1.0, "--temperature", min=0.01, help="Sampling temperature of the "
                                        "candidates.")),
    "progress": (bool, PROGRESS),
    **SAMPLER_OPTS,
})
def train_dagrpo(data: List[Path] = DATA, model: str = MODEL, out: Path = OUT, **kw: Any) -> None:
    """DA-GRPO baseline: K sampled decisions per expert context, rubric-judged, group-relative PG."""
    import os
    from datetime import datetime, timezone

    from ..log.events import EventLog
    from ..models.gateway import Gateway
    from .dagrpo import GRPOSettings, RubricJudge, make_objective
    from .objectives import GenSettings

    o = _split(kw, ("judge", "config", "judge_base_url", "judge_api_key_env", "k", "max_new_tokens", "temperature",
                    "progress"))
    sampler = _make_sampler({**_sampler_opts(kw), "sample_seed": kw["sample_seed"]}, out)
    judge_model, judge_opts = _role_model("judge", "--judge", o["judge"], o["config"], o["judge_base_url"],
                                          o["judge_api_key_env"])
    items = _load_items(data, "dagrpo")
    cfg = _settings("dagrpo", model, out, **kw)
    out.mkdir(parents=True, exist_ok=True)
    rank = int(os.environ.get("RANK", "0"))  # under accelerate launch every rank judges its own share
    name = "judge_events.jsonl" if rank == 0 else f"judge_events.rank{rank}.jsonl"
    log = EventLog(out / name, "dagrpo-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S"), "dagrpo")
    try:
        judge = RubricJudge(judge_model, Gateway(log), max_tokens=judge_opts.max_tokens or 128)
        settings = GRPOSettings(k=o["k"], gen=GenSettings(max_new_tokens=o["max_new_tokens"],
                                                          temperature=o["temperature"]))
        _train(cfg, items, make_objective(judge, settings), progress=o["progress"],
               gen_tokens=o["max_new_tokens"], sampler=sampler)
    finally:
        log.close()
    out_console.print(f"trained dagrpo on {len(items)} expert contexts; policy in {out / 'final'}")


@train_app.command("accelerate-config")
def accelerate_config(name: str = typer.Argument(..., help="ddp | fsdp2 | deepspeed_zero2 | deepspeed_zero3")) -> None:
    """Print the path of a shipped accelerate config: accelerate launch --config_file $(porchestra train
    accelerate-config ddp) -m porchestra train ..."""
    path = Path(__file__).parent / "accelerate_configs" / f"{name}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in path.parent.glob("*.yaml"))
        fail(f"NAME: no accelerate config {name!r} (have {', '.join(names)})")
    out_console.print(str(path), soft_wrap=True)
