"""A small OpenAI-compatible generation server for OPOD's server-side sampling (CPU tests, small runs).

It speaks the part of vLLM's API that `sampler.ServerSampler` uses, with vLLM's field names, so the
trainer talks to vLLM and to this server with the same code:

    POST /v1/completions        prompt as token ids (list[int] or list[list[int]]), n, max_tokens,
                                temperature, top_p, seed, stop_token_ids. Each choice carries
                                `token_ids` (vLLM's return_token_ids), `logprobs.tokens` spelled
                                "token_id:<id>" (vLLM's return_tokens_as_token_ids) and
                                `logprobs.token_logprobs` (the model's raw log-probabilities).
    POST /v1/load_lora_adapter  {"lora_name", "lora_path"}: vLLM's runtime LoRA loading; the adapter
                                is then served under its name (older adapters are dropped).
    POST /v1/load_weights       {"path"}: porchestra's extension for full fine-tuning (new base weights).
    GET  /v1/models, GET /health, GET /v1/porchestra/state (the versions loaded so far, in order).

    python -m porchestra.train.sample_server --model DIR [--host 127.0.0.1] [--port 8011]

One request at a time; generation is transformers' `generate` on CPU or one GPU. For real runs use vLLM.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from contextlib import nullcontext
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch


class SampleModel:
    """The served weights: a base model plus, optionally, one named LoRA adapter."""

    def __init__(self, path: str, name: str = "student"):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = name
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(self.device).eval()
        self.tok = AutoTokenizer.from_pretrained(path)
        self.model: Any = self.base
        self.adapter: str | None = None
        self.loads: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def load_lora(self, name: str, path: str) -> None:
        from peft import PeftModel

        with self.lock:
            if self.adapter is None:
                self.model = PeftModel.from_pretrained(self.base, path, adapter_name=name).eval()
            else:
                self.model.load_adapter(path, adapter_name=name)
                self.model.set_adapter(name)
                self.model.delete_adapter(self.adapter)
            self.adapter = name
            self.loads.append({"kind": "lora", "name": name, "path": path, "time": time.time()})

    def load_weights(self, path: str) -> None:
        from transformers import AutoModelForCausalLM

        with self.lock:
            self.base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(self.device).eval()
            self.model, self.adapter = self.base, None
            self.loads.append({"kind": "weights", "name": self.name, "path": path, "time": time.time()})

    def names(self) -> list[str]:
        return [self.name] + ([self.adapter] if self.adapter else [])

    @torch.no_grad()
    def complete(self, req: dict[str, Any]) -> dict[str, Any]:
        name = req.get("model") or self.name
        if name not in self.names():
            raise KeyError(f"model {name!r} is not served (have {self.names()})")
        prompts = req.get("prompt")
        if isinstance(prompts, list) and prompts and isinstance(prompts[0], int):
            prompts = [prompts]
        if not isinstance(prompts, list) or not all(isinstance(p, list) and p for p in prompts):
            raise ValueError("prompt: give token ids (a list of ints or a list of lists of ints)")
        n, temp = int(req.get("n", 1)), float(req.get("temperature", 1.0))
        stop = set(req.get("stop_token_ids") or []) | {self.tok.eos_token_id}
        if req.get("seed") is not None:
            torch.manual_seed(int(req["seed"]))
        choices = []
        with self.lock:
            net = self.model
            off = net.disable_adapter() if (self.adapter and name == self.name) else nullcontext()
            with off:
                for p in prompts:
                    ids = torch.tensor([p], device=self.device)
                    out = net.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                       do_sample=temp > 0, temperature=max(temp, 1e-5),
                                       top_p=float(req.get("top_p", 1.0)), top_k=0,
                                       max_new_tokens=int(req.get("max_tokens", 16)), num_return_sequences=n,
                                       eos_token_id=sorted(stop), pad_token_id=self.tok.pad_token_id or 0,
                                       output_logits=True, return_dict_in_generate=True)
                    for j in range(n):
                        choices.append(self._choice(len(choices), out, j, ids.shape[1], stop))
        return {"id": f"cmpl-{time.time_ns()}", "object": "text_completion", "created": int(time.time()),
                "model": name, "choices": choices}

    def _choice(self, index: int, out: Any, j: int, plen: int, stop: set[int]) -> dict[str, Any]:
        row = out.sequences[j, plen:].tolist()
        ids, finish = [], "length"
        for k, t in enumerate(row):
            ids.append(t)
            if t in stop:
                finish = "stop"
                break
        lps = [float(torch.log_softmax(out.logits[k][j].float(), -1)[t]) for k, t in enumerate(ids)]
        return {"index": index, "text": self.tok.decode(ids, skip_special_tokens=True), "finish_reason": finish,
                "token_ids": ids, "logprobs": {"tokens": [f"token_id:{t}" for t in ids], "token_logprobs": lps}}


def make_server(model: SampleModel, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:  # quiet
            return None

        def _send(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {"status": "ok"})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": n, "object": "model"} for n in model.names()]})
            elif self.path == "/v1/porchestra/state":
                self._send(200, {"loads": model.loads, "served": model.names()})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path == "/v1/completions":
                    self._send(200, model.complete(req))
                elif self.path == "/v1/load_lora_adapter":
                    model.load_lora(str(req["lora_name"]), str(req["lora_path"]))
                    self._send(200, {"status": "ok"})
                elif self.path == "/v1/load_weights":
                    model.load_weights(str(req["path"]))
                    self._send(200, {"status": "ok"})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
            except KeyError as e:
                self._send(404 if self.path == "/v1/completions" else 400, {"error": {"message": str(e)}})
            except (ValueError, TypeError, OSError) as e:
                self._send(400, {"error": {"message": str(e)}})

    return ThreadingHTTPServer((host, port), Handler)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HF checkpoint directory (the SFT weights)")
    ap.add_argument("--served-model-name", default="student")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    server = make_server(SampleModel(args.model, args.served_model_name), args.host, args.port)
    print(f"serving {args.model} as {args.served_model_name} on http://{args.host}:{server.server_port}/v1",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
