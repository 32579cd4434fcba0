"""Peer of `ridgeline bench latency`: Hugging Face transformers, eager PyTorch (no torch.compile, no CUDA graphs),
on the same model shape with random weights (AutoModelForCausalLM.from_config, bf16, cuda), the same batch and
lengths: random prompts of --input-len tokens, greedy, exactly --output-len new tokens. TTFT = time of a
generate() with one new token; TPOT = (time of the full generate() - TTFT) / (output_len - 1); decode tok/s =
batch / TPOT. One warm-up generate first. Prints `RESULT e2e <shape> <value> <unit> transformers_eager` lines.

usage: transformers_e2e.py CONFIG_DIR --batch B --input-len L --output-len N
"""
import argparse
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM


def timed_generate(model, ids, new_tokens):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                         min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    assert out.shape[1] == ids.shape[1] + new_tokens, out.shape
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config_dir")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=256)
    a = ap.parse_args()
    cfg = AutoConfig.from_pretrained(a.config_dir)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.eval()
    # Small random weights keep activations finite; their values do not change the timing.
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.02, 0.02)
    ids = torch.randint(10, cfg.vocab_size, (a.batch, a.input_len), device="cuda")
    name = cfg.architectures[0] if cfg.architectures else cfg.model_type
    print(f"# transformers {transformers.__version__} torch {torch.__version__} {torch.cuda.get_device_name()} "
          f"{name} attn={model.config._attn_implementation}", flush=True)
    with torch.no_grad():
        timed_generate(model, ids, 8)
        ttft = timed_generate(model, ids, 1)
        total = timed_generate(model, ids, a.output_len)
    tpot = (total - ttft) / (a.output_len - 1)
    shape = f"{name}_b{a.batch}_in{a.input_len}_out{a.output_len}"
    print(f"RESULT e2e_ttft {shape} {ttft * 1e3:.4g} ms transformers_eager", flush=True)
    print(f"RESULT e2e_tpot {shape} {tpot * 1e3:.4g} ms transformers_eager", flush=True)
    print(f"RESULT e2e_decode {shape} {a.batch / tpot:.4g} tok/s transformers_eager", flush=True)


if __name__ == "__main__":
    main()
