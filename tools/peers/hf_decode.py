#!/usr/bin/env python3
"""Decode speed of Hugging Face transformers on an mtlbench suite's shapes.

Builds the preset's architecture from its config with random bf16 weights
directly on the GPU (no download), runs a 128-token prompt (the suite's
prompt_len) for each batch size, then gen_len greedy decode steps with the KV
cache, timing every decode step with CUDA synchronisation, as mtlbench's
decode_tok_s counts them: decode tokens / decode time, prefill excluded.

It writes a JSON peer run that mtlbench can import next to its own runs of
the same suite (case keys name every parameter; the import keys them as
mtlbench keys the suite's cases, a value at its default such as batch=1 left
out, docs/peers.md):

  {"format": "mtlbench-peer-run/1", "kind": "peer", "tool": "transformers",
   "tool_version": "5.17.0", "suite_name": "cuda-qwen3-moe", "backend": "cuda",
   "timing_mode": "throughput", "started_at": "...Z", "ended_at": "...Z",
   "machine": {"hostname", "os", "arch", "cpu_model", "cpu_cores",
               "memory_bytes", "gpu_name", "gpu_memory_bytes", "driver",
               "extra": {"torch": ..., "cuda": ..., "attn_implementation": ...}},
   "cases": [{"key": "model/decode/batch=1/gen_len=64/prompt_len=128",
              "name": "decode/batch=1", "kind": "model",
              "params": {"model": "qwen3-30b-a3b", "dtype": "bf16", "batch": "1",
                         "prompt_len": "128", "gen_len": "64"},
              "layers_run": 48, "layers_total": 48,
              "samples": [{"rep": 0, "metric": "decode_tok_s", "value": 51.2,
                           "unit": "tok/s"}, ...]}]}

Metrics per repetition: decode_tok_s (tok/s), step_ms (median decode step,
ms), prefill_tok_s (tok/s), ttft_ms (prefill plus the first token, ms).

Usage (on the GPU machine):
  python3 tools/peers/hf_decode.py --preset qwen3-30b-a3b --batch 1,16 \
      --prompt-len 128 --gen-len 64 --out peer-hf.json
"""

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import sys
import time

PRESETS = {
    "qwen3-30b-a3b": dict(model_type="qwen3_moe", vocab_size=151936, hidden_size=2048, num_hidden_layers=48,
                          num_attention_heads=32, num_key_value_heads=4, head_dim=128, intermediate_size=6144,
                          max_position_embeddings=40960, rope_theta=1e6, rms_norm_eps=1e-6, num_experts=128,
                          num_experts_per_tok=8, moe_intermediate_size=768, norm_topk_prob=True,
                          decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False),
    "qwen3-moe-mini": dict(model_type="qwen3_moe", vocab_size=8192, hidden_size=512, num_hidden_layers=6,
                           num_attention_heads=8, num_key_value_heads=2, head_dim=64, intermediate_size=1536,
                           max_position_embeddings=4096, rope_theta=1e6, rms_norm_eps=1e-6, num_experts=32,
                           num_experts_per_tok=4, moe_intermediate_size=256, norm_topk_prob=True,
                           decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False),
    "tinyllama-1.1b": dict(model_type="llama", vocab_size=32000, hidden_size=2048, num_hidden_layers=22,
                           num_attention_heads=32, num_key_value_heads=4, intermediate_size=5632,
                           max_position_embeddings=2048, rope_theta=10000.0, rms_norm_eps=1e-5,
                           tie_word_embeddings=False),
}


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build_model(preset, layers):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    kw = dict(PRESETS[preset])
    model_type = kw.pop("model_type")
    if layers:
        kw["num_hidden_layers"] = layers
    theta = kw["rope_theta"]
    kw["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    cfg = AutoConfig.for_model(model_type, **kw)
    torch.manual_seed(1)
    with torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
        except TypeError:  # transformers 4
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    model.eval()
    return model, cfg


def run_case(model, vocab, batch, prompt_len, gen_len, reps, warmup, seed):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, prompt_len), device="cuda", generator=g)
    results = []
    with torch.inference_mode():
        for rep in range(warmup + reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model(input_ids=ids, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            steps = []
            for _ in range(gen_len - 1):
                s = time.perf_counter()
                out = model(input_ids=nxt, past_key_values=past, use_cache=True)
                past = out.past_key_values
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                torch.cuda.synchronize()
                steps.append(time.perf_counter() - s)
            del past, out
            if rep < warmup:
                continue
            results.append({
                "decode_tok_s": (batch * len(steps) / sum(steps), "tok/s"),
                "step_ms": (statistics.median(steps) * 1e3, "ms"),
                "prefill_tok_s": (batch * prompt_len / (t1 - t0), "tok/s"),
                "ttft_ms": ((t1 - t0) * 1e3, "ms"),
            })
    return results


def machine(torch):
    import transformers

    mem = 0
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    props = torch.cuda.get_device_properties(0)
    driver = ""
    try:
        import subprocess
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception:  # noqa: BLE001 - the driver version is informative only
        pass
    return {"hostname": socket.gethostname(), "os": sys.platform, "arch": platform.machine(), "cpu_model": cpu,
            "cpu_cores": os.cpu_count(), "memory_bytes": mem, "gpu_name": props.name,
            "gpu_memory_bytes": props.total_memory, "driver": driver,
            "extra": {"torch": torch.__version__, "cuda": torch.version.cuda or "",
                      "transformers": transformers.__version__}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="qwen3-30b-a3b", choices=sorted(PRESETS))
    ap.add_argument("--batch", default="1,16", help="batch sizes, comma separated")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen-len", type=int, default=64)
    ap.add_argument("--layers", type=int, default=0, help="run only the first N layers")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--suite", default="cuda-qwen3-moe", help="suite name the peer run stands beside")
    ap.add_argument("--group", default="decode", help="case group name in that suite")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="-", help="JSON output file (- for stdout)")
    a = ap.parse_args()

    import torch
    import transformers

    started = utc_now()
    t = time.perf_counter()
    model, cfg = build_model(a.preset, a.layers)
    print(f"built {a.preset} ({cfg.num_hidden_layers} layers, random bf16) in {time.perf_counter() - t:.1f}s; "
          f"attention {getattr(cfg, '_attn_implementation', '?')}", file=sys.stderr)
    layers_total = PRESETS[a.preset]["num_hidden_layers"]
    cases = []
    for b in [int(x) for x in a.batch.split(",") if x]:
        reps = run_case(model, cfg.vocab_size, b, a.prompt_len, a.gen_len, a.reps, a.warmup, a.seed)
        params = {"batch": str(b), "gen_len": str(a.gen_len), "prompt_len": str(a.prompt_len)}
        key = "model/" + a.group + "/" + "/".join(f"{k}={params[k]}" for k in sorted(params))
        if a.layers:
            params["layers"] = str(a.layers)
        params.update({"model": a.preset, "dtype": "bf16"})
        samples = [{"rep": i, "metric": m, "value": v, "unit": u} for i, r in enumerate(reps) for m, (v, u) in r.items()]
        cases.append({"key": key, "name": f"{a.group}/batch={b}", "kind": "model", "params": params,
                      "layers_run": cfg.num_hidden_layers, "layers_total": layers_total, "samples": samples})
        tok = statistics.median(r["decode_tok_s"][0] for r in reps)
        print(f"{a.preset} batch={b}: decode {tok:.1f} tok/s (median of {len(reps)})", file=sys.stderr)
    m = machine(torch)
    m["extra"]["attn_implementation"] = str(getattr(cfg, "_attn_implementation", ""))
    run = {"format": "mtlbench-peer-run/1", "kind": "peer", "tool": "transformers",
           "tool_version": transformers.__version__, "suite_name": a.suite, "backend": "cuda",
           "timing_mode": "throughput", "started_at": started, "ended_at": utc_now(), "machine": m, "cases": cases}
    text = json.dumps(run, indent=2)
    if a.out == "-":
        print(text)
    else:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
