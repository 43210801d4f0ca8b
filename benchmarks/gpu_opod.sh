#!/usr/bin/env bash
# NOT YET RUN: prepared for a session that has a GPU (issue 16 item 5). Budget: ~10 minutes.
#
# One bf16 OPOD step on SmolLM2-135M on the GPU: CUDA placement, peak memory and time per step of
# sft / opod / opd / TRL SDFT (benchmarks/bench_opod.py, each in a fresh process), the same in fp32 for
# the CPU comparison in docs/training.md, then 2 training steps through the real CLI (`porchestra
# train opod`, in-process sampler) and, if vLLM installs, the same with vLLM as the server sampler.
# Everything it measures goes to $OUT (or ./gpu-out) as text; copy the figures into docs/training.md.
#
#   bash benchmarks/gpu_opod.sh            # from the repository root, venv active
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

log "device"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$OUT/summary.txt"
python - <<'EOF' 2>&1 | tee -a "$OUT/summary.txt"
import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.version.cuda)
EOF

log "bench bf16 (4 decisions, 64 sampled tokens, 3 steps after warm-up)"
timeout 240 python benchmarks/bench_opod.py --decisions 4 --new-tokens 64 --steps 3 --bf16 \
    --variants sft,opod,opd,trl_sdft,sft_full,opod_full 2>&1 | tee "$OUT/bench_bf16.txt" | tee -a "$OUT/summary.txt"

log "bench bf16, 8 decisions, 256 sampled tokens"
timeout 180 python benchmarks/bench_opod.py --decisions 8 --new-tokens 256 --steps 2 --bf16 \
    --variants sft,opod,opd,trl_sdft 2>&1 | tee "$OUT/bench_bf16_256.txt" | tee -a "$OUT/summary.txt"

log "real CLI: 2 OPOD steps on the GPU (fixture records, scripted attribution)"
W=$(mktemp -d)
F=tests/fixtures/train
porchestra export records $F/run_fail $F/run_ok --out $W/rec.jsonl >/dev/null
python -c "import json; open('$W/a.json','w').write(json.dumps(['{\"needs_repair\": true, \"hint\": \"Add execute_python to tools.\"}', '{\"needs_repair\": false, \"hint\": \"\"}'] * 2))"
porchestra attribute $F/run_fail $F/run_ok --model scripted:$W/a.json --out $W/attr.jsonl >/dev/null
timeout 180 porchestra train opod $W/rec.jsonl --attributions $W/attr.jsonl --model local:smollm2 \
    --out $W/opod --max-steps 2 --batch-size 3 --max-new-tokens 64 --bf16 --no-progress 2>&1 | tail -3
cat $W/opod/metrics.jsonl | tee "$OUT/cli_metrics.jsonl" | tee -a "$OUT/summary.txt"

log "vLLM as the server sampler (optional)"
if timeout 200 pip install -q vllm >"$OUT/vllm_install.txt" 2>&1; then
    BASE=$(python -c "from porchestra.train.modelio import resolve_base_dir; print(resolve_base_dir('local:smollm2'))")
    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True timeout 300 vllm serve "$BASE" --served-model-name student \
        --enable-lora --max-lora-rank 16 --port 8017 --gpu-memory-utilization 0.3 >"$OUT/vllm.txt" 2>&1 &
    VPID=$!
    for _ in $(seq 120); do curl -sf localhost:8017/health >/dev/null && break; sleep 1; done
    timeout 120 porchestra train opod $W/rec.jsonl --attributions $W/attr.jsonl --model local:smollm2 \
        --out $W/opod_vllm --max-steps 3 --batch-size 3 --max-new-tokens 64 --bf16 --no-progress \
        --sampler server --sampler-url http://127.0.0.1:8017/v1 --sync-every 2 2>&1 | tail -3
    cat $W/opod_vllm/metrics.jsonl | tee "$OUT/cli_vllm_metrics.jsonl" | tee -a "$OUT/summary.txt"
    kill $VPID
else
    log "vllm did not install (see vllm_install.txt)"
fi
log "done"
