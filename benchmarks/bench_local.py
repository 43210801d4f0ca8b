"""Embedded backend (`local:smollm2`) vs llama.cpp's OpenAI-compatible server on the same GGUF
(not a test; the server is not a dependency).

Replays the LLM calls of a recorded porchestra run (an events.jsonl), in their order, against both:
per agent turn, the same messages, the same reply budget (the recorded reply length, capped), JSON
output on both sides (our grammar for any JSON object; the server's `json_object` mode), greedy.
Then decode speed: 128 forced tokens (end-of-sequence banned) after the longest recorded prompt,
already cached on both sides. One thread each; the two sides are interleaved call by call (the
order alternating) so load from other processes on the machine hits both alike. Ratios from one run.

    python benchmarks/bench_local.py --events runs/x/events.jsonl \\
        --llama-python /opt/llamacpp/venv/bin/python --port 8791

The server keeps the K/V of its last prompt only (a single slot, its default), so when calls of
different agents alternate it re-prefills from their common prefix; ours keeps a few conversations.
That is each side's default behaviour, which is what a user gets.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

os.environ.setdefault("PORCHESTRA_TORCH_THREADS", "1")
os.environ.setdefault("PORCHESTRA_DECODE_THREADS", "1")

ANY_OBJECT = {"type": "object"}


def recorded_calls(paths: list[Path], limit: int) -> list[dict[str, Any]]:
    calls = []
    lines = [line for events in paths for line in events.read_text().splitlines()]
    for line in lines:
        e = json.loads(line)
        if e.get("event") == "llm_call" and e.get("messages") and e.get("response") is not None:
            calls.append({"agent": e.get("agent_id"), "messages": e["messages"],
                          "out": int(e.get("usage", {}).get("output") or 64)})
    return calls[:limit]


def start_server(python: str, gguf: Path, port: int) -> subprocess.Popen:
    cmd = [python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "smollm2",
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192",
           "--n_threads", "1", "--n_threads_batch", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"llama.cpp server exited with {proc.returncode}")
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("llama.cpp server did not come up in 120 s")


def server_call(port: int, messages: list[dict], max_tokens: int, json_mode: bool = True,
                logit_bias: dict[str, float] | None = None) -> tuple[float, dict]:
    body: dict[str, Any] = {"model": "smollm2", "messages": messages, "max_tokens": max_tokens,
                            "temperature": 0.0}
    if json_mode:
        body["response_format"] = {"type": "json_object"}
    if logit_bias:
        body["logit_bias"] = logit_bias
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        reply = json.loads(r.read())
    return time.perf_counter() - t, reply.get("usage", {})


def ours_call(model: Any, messages: list[dict], max_tokens: int) -> tuple[float, Any]:
    t = time.perf_counter()
    c = model.complete(messages, schema=ANY_OBJECT, max_tokens=max_tokens)
    return time.perf_counter() - t, c.usage


def ours_forced(model: Any, messages: list[dict], n: int) -> float:
    """Seconds for n tokens with EOS banned, the prompt's K/V taken from the conversation cache."""
    from porchestra.models.local import decode, encode_chat

    lm = model.load()
    with lm.lock:
        prompt = encode_chat(lm.tokenizer, messages)
        cache, reused = lm.kv.take(prompt)
        t = time.perf_counter()
        out = decode(lm.model, prompt, max_new=n, eos=set(), cache=cache, reused=reused)
        elapsed = time.perf_counter() - t
        lm.kv.put(out.cached, out.cache, prompt_len=len(prompt))
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=Path, nargs="+", required=True, help="events.jsonl of porchestra runs")
    ap.add_argument("--llama-python", default="/opt/llamacpp/venv/bin/python")
    ap.add_argument("--port", type=int, default=8791)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--max-out", type=int, default=128, help="cap on a turn's reply budget")
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()

    import torch

    from porchestra.models.local import LocalModel
    from porchestra.models.local_weights import embedded_gguf, weights_dtype

    torch.set_num_threads(1)
    calls = recorded_calls(args.events, args.turns)
    if not calls:
        raise SystemExit(f"no llm_call events with messages in {args.events}")
    model = LocalModel("smollm2")
    lm = model.load()
    server = start_server(args.llama_python, embedded_gguf("smollm2"), args.port)
    try:
        warm = [{"role": "user", "content": "Say hi as JSON."}]
        server_call(args.port, warm, 4)
        ours_call(model, warm, 4)
        lm.kv.clear()
        rows = []
        for i, call in enumerate(calls):
            budget = min(max(call["out"], 8), args.max_out)
            sides = ("ours", "llama") if i % 2 == 0 else ("llama", "ours")
            row: dict[str, Any] = {"turn": i, "agent": call["agent"], "budget": budget}
            for side in sides:
                if side == "ours":
                    sec, usage = ours_call(model, call["messages"], budget)
                    row.update(ours_s=sec, prompt=usage.input, cached=usage.cached_input or 0,
                               ours_out=usage.output)
                else:
                    sec, usage = server_call(args.port, call["messages"], budget)
                    row.update(llama_s=sec, llama_prompt=usage.get("prompt_tokens"),
                               llama_out=usage.get("completion_tokens"))
            rows.append(row)
            print(f"turn {i:2d} {row['agent']:<12} prompt {row['prompt']:5d} (cached {row['cached']:5d}) "
                  f"out {row['ours_out']:3d}/{row['llama_out']:3d}  ours {row['ours_s']:6.2f}s  "
                  f"llama {row['llama_s']:6.2f}s  ratio {row['ours_s'] / row['llama_s']:.2f}", flush=True)

        longest = max(calls, key=lambda c: len(json.dumps(c["messages"])))["messages"]
        eos = str(lm.tokenizer.eos_token_id)
        n = args.decode_tokens
        timings: dict[str, list[float]] = {"ours": [], "llama": []}
        server_call(args.port, longest, 1, json_mode=False)  # both sides: the prompt cached
        ours_forced(model, longest, 1)
        for rep in range(2):
            for side in (("ours", "llama") if rep == 0 else ("llama", "ours")):
                if side == "ours":
                    one, many = ours_forced(model, longest, 1), ours_forced(model, longest, n + 1)
                else:
                    one = server_call(args.port, longest, 1, json_mode=False, logit_bias={eos: -100})[0]
                    many = server_call(args.port, longest, n + 1, json_mode=False, logit_bias={eos: -100})[0]
                timings[side].append(n / max(many - one, 1e-6))
    finally:
        server.terminate()
        server.wait(timeout=30)

    ours_total = sum(r["ours_s"] for r in rows)
    llama_total = sum(r["llama_s"] for r in rows)
    per_turn = [r["ours_s"] / r["llama_s"] for r in rows]
    # Per output token too: the two sides may stop at different lengths (each ends its JSON).
    norm = [(r["ours_s"] / max(r["ours_out"], 1)) / (r["llama_s"] / max(r["llama_out"] or 1, 1)) for r in rows]
    ours_dec, llama_dec = max(timings["ours"]), max(timings["llama"])
    summary = {
        "turns": len(rows), "weights": weights_dtype(), "threads": 1,
        "turn_latency_ratio_total": ours_total / llama_total,
        "turn_latency_ratio_median": statistics.median(per_turn),
        "turn_latency_per_output_token_ratio_median": statistics.median(norm),
        "ours_total_s": ours_total, "llama_total_s": llama_total,
        "cached_prompt_fraction": sum(r["cached"] for r in rows) / max(sum(r["prompt"] for r in rows), 1),
        "decode_tok_s": {"ours": ours_dec, "llama": llama_dec, "ratio": ours_dec / llama_dec},
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "turns": rows}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
