"""The training side: decision records, attribution (paper F.3), SFT / RWR / OPOD / DA-GRPO.

records → attribution → data (items) → objectives (losses) → trainer; cli mounts the verbs.
Heavy dependencies (torch, transformers, peft) are imported by the modules that need them only.
"""
