#!/usr/bin/env python3
"""Golden fixtures for ridgeline's model tests, made with transformers on the GPU machine.

For each case: a tiny random float32 checkpoint (hidden <= 128, 2-3 layers) saved with save_pretrained, a random
prompt, transformers' greedy continuation (24 tokens, EOS disabled) and the teacher-forced logits of every
position of prompt + continuation. Weights are drawn wider than the default init (normal, std 0.08; norm weights
1 + N(0, 0.1)) so logits are far from uniform and greedy steps are well separated.

Output per case under OUT/<case>/: config.json, generation_config.json, model.safetensors (or shards +
model.safetensors.index.json), golden.json {prompt_ids, greedy_ids, min_margin, transformers_version},
logits.safetensors {"logits": F32 [positions, vocab]}.

Usage: python3 tools/make_fixtures.py --out DIR
"""
import argparse
import json
import os

import torch
import transformers
from safetensors.torch import save_file

VOCAB = 320
PROMPT_LEN = 12
NEW_TOKENS = 24


def llama3_rope(cfg_cls_kwargs):
    # transformers 5 takes rope_parameters; older versions rope_scaling + rope_theta.
    rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32, "rope_theta": 10000.0}
    cfg_cls_kwargs["rope_parameters"] = rope
    cfg_cls_kwargs["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
    cfg_cls_kwargs["rope_theta"] = 10000.0
    return cfg_cls_kwargs


def cases():
    c = transformers
    common = dict(vocab_size=VOCAB, max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2)
    return [
        # GQA 4:2, untied, llama3 rope scaling (medium band covered: head_dim 16 wavelengths 6..19869, ctx 32).
        ("llama_gqa_llama3rope", c.LlamaConfig, llama3_rope(dict(
            hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, tie_word_embeddings=False, **common)), None),
        # Explicit head_dim (32) != hidden / heads (16), tied embeddings, attention and MLP biases, MHA.
        ("llama_headdim_tied_bias", c.LlamaConfig, dict(
            hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=4, head_dim=32, tie_word_embeddings=True, attention_bias=True, mlp_bias=True,
            rope_theta=500000.0, **common), None),
        # Mistral, GQA 6:2, sharded checkpoint.
        ("mistral_sharded", c.MistralConfig, dict(
            hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=6,
            num_key_value_heads=2, sliding_window=None, tie_word_embeddings=False, rope_theta=1000000.0,
            **common), "60KB"),
        # Qwen2: q/k/v bias, GQA 4:2, untied.
        ("qwen2_qkv_bias", c.Qwen2Config, dict(
            hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, tie_word_embeddings=False, use_sliding_window=False, rope_theta=1000000.0,
            **common), None),
        # Qwen3: q/k norm, explicit head_dim 32, GQA 4:1, tied.
        ("qwen3_qknorm_tied", c.Qwen3Config, dict(
            hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=1, head_dim=32, tie_word_embeddings=True, use_sliding_window=False,
            rope_theta=1000000.0, **common), None),
        # Qwen3 with attention_bias and GQA 8:2 at hidden 128.
        ("qwen3_bias_gqa", c.Qwen3Config, dict(
            hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=8,
            num_key_value_heads=2, head_dim=16, tie_word_embeddings=False, attention_bias=True,
            use_sliding_window=False, rope_theta=10000.0, **common), None),
    ]


def init_wide(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=gen))


def make(out_root, name, cfg_cls, kwargs, shard, seed):
    import inspect
    gen = torch.Generator().manual_seed(seed)
    try:
        cfg = cfg_cls(**kwargs)
    except TypeError:
        kw = {k: v for k, v in kwargs.items() if k != "rope_parameters"}
        cfg = cfg_cls(**kw)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.eval()
    init_wide(model, gen)
    if cfg.tie_word_embeddings:
        model.tie_weights()
    prompt = torch.randint(3, VOCAB, (1, PROMPT_LEN), generator=gen)
    with torch.no_grad():
        out = model.generate(prompt, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                             eos_token_id=None, pad_token_id=0, use_cache=True)
        full = out[0:1]
        logits = model(full).logits[0].float()
    greedy = full[0, PROMPT_LEN:].tolist()
    # Margin between the top-2 logits at each greedy step (positions PROMPT_LEN-1 .. end-1).
    steps = logits[PROMPT_LEN - 1:PROMPT_LEN - 1 + NEW_TOKENS]
    top2 = torch.topk(steps, 2, dim=-1).values
    margins = (top2[:, 0] - top2[:, 1]).tolist()
    assert torch.equal(steps.argmax(-1), torch.tensor(greedy)), "teacher-forced argmax != generate()"
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    if shard:
        model.save_pretrained(d, safe_serialization=True, max_shard_size=shard)
    else:
        model.save_pretrained(d, safe_serialization=True)
    save_file({"logits": logits.contiguous()}, os.path.join(d, "logits.safetensors"))
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump({"prompt_ids": prompt[0].tolist(), "greedy_ids": greedy, "min_margin": min(margins),
                   "margins": margins, "seed": seed, "transformers_version": transformers.__version__,
                   "torch_version": torch.__version__}, f, indent=1)
    print(f"{name}: files={sorted(os.listdir(d))} min_margin={min(margins):.4f}")
    print(open(os.path.join(d, "config.json")).read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    for i, (name, cls, kw, shard) in enumerate(cases()):
        make(args.out, name, cls, kw, shard, seed=1000 + i)


if __name__ == "__main__":
    main()
