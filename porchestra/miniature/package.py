"""Ship a miniature adapter inside the package as a named local model (`local:porchestra-mini`):

    python -m porchestra.miniature.package runs/miniature/sft/adapter porchestra/data/adapters/porchestra-mini

The LoRA weights are stored in bf16 (half the bytes; merging them into the fp32 base changes the
merged weights by less than bf16's rounding of the update), the base is named `local:smollm2` so the
adapter resolves on any machine, and provenance.json says which recipe run produced it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

KEEP = ("adapter_config.json",)


def package_adapter(src: Path, dest: Path, base: str = "local:smollm2", note: dict | None = None) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    if not (src / "adapter_config.json").is_file():
        raise ValueError(f"{src}: not a PEFT adapter directory (no adapter_config.json)")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cfg = json.loads((src / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = base
    cfg["inference_mode"] = True
    (tmp / "adapter_config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    weights = load_file(str(src / "adapter_model.safetensors"))
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in weights.items()}, str(tmp / "adapter_model.safetensors"))
    (tmp / "provenance.json").write_text(json.dumps({"source": str(src), **(note or {})}, indent=2) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m porchestra.miniature.package", description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, help="the trained adapter (OUT/<arm>/adapter)")
    ap.add_argument("dest", type=Path, help="where to write it (porchestra/data/adapters/<name>)")
    ap.add_argument("--note", default="{}", help="JSON merged into provenance.json")
    args = ap.parse_args(argv)
    try:
        out = package_adapter(args.src, args.dest, note=json.loads(args.note))
    except (ValueError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"wrote {out} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
