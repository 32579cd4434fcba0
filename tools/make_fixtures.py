#!/usr/bin/env python3
"""Golden fixtures for ridgeline's model tests, made with transformers on the GPU machine.

For each case: a tiny random float32 checkpoint (hidden <= 128, 2-3 layers) saved with save_pretrained, a random
prompt, transformers' greedy continuation (24 tokens, EOS disabled) and the teacher-forced logits of every
position of prompt + continuation. Weights are drawn wider than the default init (normal, std 0.08; norm weights
1 + N(0, 0.1)) so logits are far from uniform and greedy steps are well separated.

Output per case under OUT/<case>/: config.json, generation_config.json, model.safetensors (or shards +
model.safetensors.index.json), golden.json {prompt_ids, greedy_ids, min_margin, transformers_version, routing_margins for MoE},
logits.safetensors {"logits": F32 [positions, vocab]}.

Quantised variants (gpt_oss_mxfp4, deepseek_v3_fp8) quantise the expert / linear weights in the model first
(MXFP4: 32-value groups, e8m0 scales; FP8 e4m3 with block scales), so the goldens are transformers' outputs with
exactly the dequantised values, and write the checkpoint in the published packed layout (*_blocks / *_scales,
weight_scale_inv). Where transformers can load that layout back, the script reloads it and prints the difference.
MoE checkpoints are written with per-expert tensors as published on the Hub when the saved state is fused.

--sources FILE writes the transformers source of the modelling code these cases rely on (for reference).

Usage: python3 tools/make_fixtures.py --out DIR [--cases a,b] [--sources FILE]
"""
import argparse
import json
import os
import shutil
import traceback

import torch
import transformers
from safetensors.torch import load_file, save_file

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
            gpt2_ln = (".ln_" in name or name.startswith("ln_")) and name.endswith(".weight")
            if name.endswith("norm.weight") or "layernorm" in name or gpt2_ln:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.08 * torch.randn(p.shape, generator=gen))


def new_cases():
    c = transformers
    common = dict(vocab_size=VOCAB, bos_token_id=1, eos_token_id=2)
    yarn = {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
            "original_max_position_embeddings": 64}
    return [
        # GPT-2: LayerNorm with bias, gelu_new (tanh), learned positions, Conv1D weights, tied head, n_inner != 4h.
        ("gpt2_tied", c.GPT2Config, dict(
            n_positions=64, n_embd=64, n_layer=2, n_head=4, n_inner=192, activation_function="gelu_new",
            layer_norm_epsilon=1e-5, tie_word_embeddings=True, **common), {}),
        # Qwen3-MoE: 8 experts top-3, norm_topk_prob, layer 1 dense via mlp_only_layers, q/k norm.
        ("qwen3_moe", c.Qwen3MoeConfig, dict(
            hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=3,
            norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1], tie_word_embeddings=False,
            use_sliding_window=False, rope_theta=1000000.0, max_position_embeddings=256, rms_norm_eps=1e-6,
            **common), {}),
        # Qwen3-MoE: decoder_sparse_step 2 (layers 1 and 3 sparse), no top-k renormalisation, tied.
        ("qwen3_moe_step2", c.Qwen3MoeConfig, dict(
            hidden_size=64, intermediate_size=80, moe_intermediate_size=48, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=1, head_dim=16, num_experts=6, num_experts_per_tok=2,
            norm_topk_prob=False, decoder_sparse_step=2, mlp_only_layers=[], tie_word_embeddings=True,
            use_sliding_window=False, rope_theta=10000.0, max_position_embeddings=256, rms_norm_eps=1e-6,
            **common), {}),
        # GPT-OSS: sinks, sliding window 8 (< 36 positions) on layers 0 and 2, YaRN, biases, clamped SwiGLU
        # (expert weights drawn wide so the clamp at 7 is hit), top-4 of 8 experts; experts MXFP4-rounded.
        ("gpt_oss", c.GptOssConfig, dict(
            hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, num_local_experts=8, num_experts_per_tok=4, sliding_window=8,
            rope_theta=150000.0, rope_scaling=dict(yarn, truncate=False),
            rope_parameters=dict(yarn, truncate=False, rope_theta=150000.0), max_position_embeddings=256,
            tie_word_embeddings=False, attention_bias=True, swiglu_limit=7.0, rms_norm_eps=1e-5, **common),
         {"mxfp4": True, "expert_std": 0.6, "sinks_std": 1.0}),
        # DeepSeek-V3: MLA with q_lora_rank, YaRN with mscale, first layer dense, 8 routed experts in 4 groups
        # (top-2 groups, top-3 experts), a shared expert, e_score_correction_bias; FP8 variant with 16x16 blocks.
        ("deepseek_v3", c.DeepseekV3Config, dict(
            hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=3,
            num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8,
            routed_scaling_factor=2.5, kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8, v_head_dim=16,
            qk_nope_head_dim=16, n_group=4, topk_group=2, num_experts_per_tok=3, first_k_dense_replace=1,
            norm_topk_prob=True, rope_theta=10000.0,
            rope_scaling=dict(yarn, mscale=1.0, mscale_all_dim=1.0),
            rope_parameters=dict(yarn, mscale=1.0, mscale_all_dim=1.0, rope_theta=10000.0),
            max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False,
            **common), {"fp8_block": 16}),
    ]


FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def mxfp4_quant(w):
    """w [..., rows, cols], cols % 32 == 0 → blocks u8 [..., rows, cols/32, 16], scales u8 [..., rows, cols/32]
    (low nibble = even element; scale = 2^(s - 127)), and the dequantised f32 tensor."""
    lut = torch.tensor(FP4)
    *pre, cols = w.shape
    g = w.float().reshape(*pre, cols // 32, 32)
    amax = g.abs().amax(-1, keepdim=True).clamp(min=1e-30)
    e = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    idx = ((g / torch.exp2(e)).unsqueeze(-1) - lut).abs().argmin(-1)
    blocks = (idx[..., 0::2] | (idx[..., 1::2] << 4)).to(torch.uint8)
    scales = (e.squeeze(-1) + 127).to(torch.uint8)
    return blocks, scales, mxfp4_dequant(blocks, scales)


def mxfp4_dequant(blocks, scales):
    lut = torch.tensor(FP4)
    lo, hi = (blocks & 0x0F).long(), (blocks >> 4).long()
    vals = torch.stack([lut[lo], lut[hi]], -1).reshape(*blocks.shape[:-1], 32)
    vals = vals * torch.exp2(scales.float() - 127).unsqueeze(-1)
    return vals.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


def fp8_quant(w, b):
    """Block-wise FP8 e4m3 over the last two dims with b x b blocks: q, scale_inv f32 [..., ceil(r/b),
    ceil(c/b)] (w ≈ q * scale_inv), dequantised f32."""
    *pre, r, c = w.shape
    pr, pc = (-r) % b, (-c) % b
    wp = torch.nn.functional.pad(w.float(), (0, pc, 0, pr))
    nr, nc = (r + pr) // b, (c + pc) // b
    g = wp.reshape(*pre, nr, b, nc, b)
    s = g.abs().amax(dim=(-3, -1), keepdim=True).clamp(min=1e-12) / 448.0
    q = (g / s).to(torch.float8_e4m3fn)
    deq = (q.float() * s).reshape(*pre, nr * b, nc * b)[..., :r, :c].contiguous()
    q = q.reshape(*pre, nr * b, nc * b)[..., :r, :c].contiguous()
    return q, s.reshape(*pre, nr, nc).contiguous(), deq


def shapes_of(path):
    sd = load_file(path)
    return {k: (str(v.dtype).replace("torch.", ""), list(v.shape)) for k, v in sorted(sd.items())}


def split_fused_experts(sd, inter_by_prefix):
    """Fused expert tensors (transformers 5: experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I]) → the
    per-expert layout of the published checkpoints (experts.{e}.gate_proj.weight, ...)."""
    out = {}
    for k, v in sd.items():
        if k.endswith("mlp.experts.gate_up_proj") and v.dim() == 3:
            p = k[: -len("gate_up_proj")]
            i = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{p}{e}.gate_proj.weight"] = v[e, :i].contiguous()
                out[f"{p}{e}.up_proj.weight"] = v[e, i:].contiguous()
        elif k.endswith("mlp.experts.down_proj") and v.dim() == 3:
            p = k[: -len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{p}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            out[k] = v
    return out


def run_golden(model, gen):
    prompt = torch.randint(3, VOCAB, (1, PROMPT_LEN), generator=gen)
    with torch.no_grad():
        out = model.generate(prompt, do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                             eos_token_id=None, pad_token_id=0, use_cache=True)
        full = out[0:1]
        logits = model(full).logits[0].float()
    greedy = full[0, PROMPT_LEN:].tolist()
    steps = logits[PROMPT_LEN - 1:PROMPT_LEN - 1 + NEW_TOKENS]
    top2 = torch.topk(steps, 2, dim=-1).values
    margins = (top2[:, 0] - top2[:, 1]).tolist()
    assert torch.equal(steps.argmax(-1), torch.tensor(greedy)), "teacher-forced argmax != generate()"
    return prompt, full, logits, greedy, margins


def routing_margins(model, cfg, full):
    """Per position, the smallest routing margin over the MoE layers, or None for a dense model.

    Top-k routing is discontinuous: where the k-th and (k+1)-th expert scores nearly tie, bf16 rounding may pick
    the other expert and that position's logits move by O(1). The margin is the gap between the last chosen and
    the first unchosen selection score (router logits for Qwen3-MoE and GPT-OSS; for DeepSeek-V3 the smaller of
    the group-selection gap and the expert gap of sigmoid + e_score_correction_bias), from the router's input
    captured by a forward pre-hook and the router's own weight (and bias), so it does not depend on what the
    router module returns."""
    hidden = getattr(cfg, "hidden_size", None)
    k = getattr(cfg, "num_experts_per_tok", None)
    if hidden is None or k is None:
        return None
    captured, hooks = [], []
    for name, mod in model.named_modules():
        w = getattr(mod, "weight", None)
        if (name.endswith("mlp.router") or name.endswith("mlp.gate")) and isinstance(w, torch.Tensor) and \
                w.dim() == 2 and w.shape[1] == hidden and w.shape[0] > k:
            hooks.append(mod.register_forward_pre_hook(
                lambda m, args: captured.append((m, args[0].detach().reshape(-1, hidden).float()))))
    if not hooks:
        return None
    with torch.no_grad():
        model(full)
    for h in hooks:
        h.remove()
    per_layer = []
    n_group = getattr(cfg, "n_group", None) or 1
    topk_group = getattr(cfg, "topk_group", None) or n_group
    for mod, x in captured:
        logits = x @ mod.weight.float().t()
        b = getattr(mod, "bias", None)
        if isinstance(b, torch.Tensor) and b.dim() == 1:
            logits = logits + b.float()
        corr = getattr(mod, "e_score_correction_bias", None)
        if isinstance(corr, torch.Tensor):  # DeepSeek-V3: sigmoid scores, group-limited selection
            scores = torch.sigmoid(logits) + corr.float()
            e = scores.shape[-1]
            g = scores.view(-1, n_group, e // n_group).topk(2, dim=-1).values.sum(-1)
            gs = g.sort(dim=-1, descending=True).values
            group_gap = gs[:, topk_group - 1] - gs[:, topk_group] if topk_group < n_group else \
                torch.full_like(gs[:, 0], float("inf"))
            keep = torch.zeros_like(g).scatter_(1, g.topk(topk_group, dim=-1).indices, 1.0)
            masked = scores.masked_fill(keep.repeat_interleave(e // n_group, dim=1) == 0, float("-inf"))
            ms = masked.sort(dim=-1, descending=True).values
            gap = torch.minimum(group_gap, ms[:, k - 1] - ms[:, k])
        else:
            srt = logits.sort(dim=-1, descending=True).values
            gap = srt[:, k - 1] - srt[:, k]
        per_layer.append(gap)
    return torch.stack(per_layer).min(dim=0).values.tolist()


def write_golden(d, prompt, logits, greedy, margins, seed, extra):
    save_file({"logits": logits.contiguous()}, os.path.join(d, "logits.safetensors"))
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(dict({"prompt_ids": prompt[0].tolist(), "greedy_ids": greedy, "min_margin": min(margins),
                        "margins": margins, "seed": seed, "transformers_version": transformers.__version__,
                        "torch_version": torch.__version__}, **extra), f, indent=1)


def reload_diff(d, full, logits, **kw):
    try:
        m = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, **kw)
        m.eval()
        with torch.no_grad():
            l2 = m(full).logits[0].float()
        return f"{(l2 - logits).abs().max().item():.3e}"
    except Exception as e:  # noqa: BLE001 — a report line, not a failure
        return f"reload failed: {type(e).__name__}: {str(e)[:300]}"


def make_new(out_root, name, cfg_cls, kwargs, opts, seed):
    gen = torch.Generator().manual_seed(seed)
    try:
        cfg = cfg_cls(**kwargs)
    except TypeError:
        cfg = cfg_cls(**{k: v for k, v in kwargs.items() if k != "rope_parameters"})
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    init_wide(model, gen)
    hidden = getattr(cfg, "hidden_size", None) or cfg.n_embd
    quant = {}  # saved-name suffix → packed tensors, filled below for the quantised variants
    with torch.no_grad():
        for n, b in model.named_buffers():
            if n.endswith("e_score_correction_bias"):
                b.copy_(0.5 * torch.randn(b.shape, generator=gen))
        for n, p in model.named_parameters():
            if n.endswith("sinks") and "sinks_std" in opts:
                p.copy_(opts["sinks_std"] * torch.randn(p.shape, generator=gen))
            if n.endswith("experts.gate_up_proj") and "expert_std" in opts:
                p.copy_(opts["expert_std"] * torch.randn(p.shape, generator=gen))
        if opts.get("mxfp4"):
            inter = cfg.intermediate_size
            for n, p in model.named_parameters():
                for pname, out_dim in (("gate_up_proj", 2 * inter), ("down_proj", hidden)):
                    if n.endswith("experts." + pname):
                        transposed = p.shape[-1] == out_dim  # stored [E, in, out]
                        w = p.data.transpose(1, 2) if transposed else p.data
                        blocks, scales, deq = mxfp4_quant(w)
                        p.copy_(deq.transpose(1, 2) if transposed else deq)
                        quant[n] = (blocks, scales, transposed)
        if cfg.tie_word_embeddings:
            model.tie_weights()
    prompt, full, logits, greedy, margins = run_golden(model, gen)
    extra = {}
    rm = routing_margins(model, cfg, full)
    if rm is not None:
        extra["routing_margins"] = rm
        print(f"{name}: routing margins min {min(rm):.4f}, below 0.02 at positions "
              f"{[i for i, v in enumerate(rm) if v < 0.02]}")
    rot = getattr(getattr(model, "model", None), "rotary_emb", None)
    if rot is not None:
        extra["inv_freq"] = rot.inv_freq.tolist()
        extra["attention_scaling"] = float(getattr(rot, "attention_scaling", 1.0))
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    st = os.path.join(d, "model.safetensors")
    saved = load_file(st)
    fused = [k for k in saved if k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj")]
    print(f"{name}: saved keys (save_pretrained): {json.dumps(shapes_of(st))}")
    if fused and not opts.get("mxfp4"):
        # Published Qwen3-MoE / DeepSeek checkpoints store each expert separately.
        per = split_fused_experts(saved, None)
        save_file(per, st, metadata={"format": "pt"})
        diff = reload_diff(d, full, logits)
        print(f"{name}: per-expert layout reload max|diff| = {diff}")
        try:
            confirmed = float(diff) < 1e-5
        except ValueError:
            confirmed = False
        if not confirmed:
            print(f"{name}: WARNING per-expert layout not confirmed; keeping the fused layout")
            save_file(saved, st, metadata={"format": "pt"})
    write_golden(d, prompt, logits, greedy, margins, seed, extra)
    print(f"{name}: files={sorted(os.listdir(d))} min_margin={min(margins):.4f} greedy={greedy}")
    print(open(os.path.join(d, "config.json")).read())

    if opts.get("mxfp4"):
        qd = d + "_mxfp4"
        shutil.copytree(d, qd, dirs_exist_ok=True)
        sd = load_file(st)
        by_suffix = {n.split("model.", 1)[-1]: v for n, v in quant.items()}
        packed = {}
        for k, v in sd.items():
            hit = [s for s in by_suffix if k.endswith(s)]
            if hit:
                blocks, scales, _ = by_suffix[hit[0]]
                packed[k + "_blocks"] = blocks.contiguous()
                packed[k + "_scales"] = scales.contiguous()
            else:
                packed[k] = v
        save_file(packed, os.path.join(qd, "model.safetensors"), metadata={"format": "pt"})
        cj = json.load(open(os.path.join(qd, "config.json")))
        cj["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
        json.dump(cj, open(os.path.join(qd, "config.json"), "w"), indent=2)
        try:
            from transformers.integrations.mxfp4 import convert_moe_packed_tensors
            for k, (blocks, scales, transposed) in list(quant.items())[:2]:
                ref = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)
                mine = mxfp4_dequant(blocks, scales)
                mine_t = mine.transpose(1, 2)
                print(f"{name}: mxfp4 vs transformers' convert_moe_packed_tensors {k}: ref {list(ref.shape)} "
                      f"as-is {'n/a' if ref.shape != mine.shape else (ref - mine).abs().max().item()} "
                      f"transposed {'n/a' if ref.shape != mine_t.shape else (ref - mine_t).abs().max().item()}")
        except Exception as e:  # noqa: BLE001
            print(f"{name}: convert_moe_packed_tensors check failed: {type(e).__name__}: {e}")
        try:
            from transformers import Mxfp4Config
            print(f"{name}_mxfp4: reload (dequantize=True) max|diff| = "
                  f"{reload_diff(qd, full, logits, quantization_config=Mxfp4Config(dequantize=True))}")
        except Exception as e:  # noqa: BLE001
            print(f"{name}_mxfp4: reload check unavailable: {type(e).__name__}: {e}")
        print(f"{name}_mxfp4: keys {json.dumps(shapes_of(os.path.join(qd, 'model.safetensors')))}")

    if opts.get("fp8_block"):
        # FP8 variant: quantise every projection weight (not embeddings, norms, the router or lm_head), rerun the
        # goldens with the dequantised values, save the e4m3 weights with weight_scale_inv.
        b = opts["fp8_block"]
        qd = d + "_fp8"
        os.makedirs(qd, exist_ok=True)
        for f in ("config.json", "generation_config.json"):
            shutil.copy(os.path.join(d, f), qd)
        sd = load_file(st)
        packed, deq_sd = {}, {}
        for k, v in sd.items():
            is_proj = k.endswith("_proj.weight") or k.endswith("_proj_with_mqa.weight") or k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj")
            if is_proj and v.dim() >= 2:
                q, s, deq = fp8_quant(v, b)
                packed[k] = q
                packed[k + "_scale_inv" if k.endswith(".weight") else k + "_weight_scale_inv"] = s
                deq_sd[k] = deq
            else:
                packed[k] = v
                deq_sd[k] = v
        save_file(deq_sd, st + ".deq", metadata={"format": "pt"})
        tmp = qd + "_tmp"
        os.makedirs(tmp, exist_ok=True)
        for f in ("config.json", "generation_config.json"):
            shutil.copy(os.path.join(d, f), tmp)
        shutil.move(st + ".deq", os.path.join(tmp, "model.safetensors"))
        m2 = transformers.AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager")
        m2.eval()
        gen2 = torch.Generator().manual_seed(seed + 500)
        prompt2, full2, logits2, greedy2, margins2 = run_golden(m2, gen2)
        shutil.rmtree(tmp)
        save_file(packed, os.path.join(qd, "model.safetensors"), metadata={"format": "pt"})
        cj = json.load(open(os.path.join(qd, "config.json")))
        cj["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [b, b]}
        json.dump(cj, open(os.path.join(qd, "config.json"), "w"), indent=2)
        rm2 = routing_margins(m2, cfg, full2)
        write_golden(qd, prompt2, logits2, greedy2, margins2, seed + 500,
                     {} if rm2 is None else {"routing_margins": rm2})
        try:
            from transformers import FineGrainedFP8Config
            print(f"{name}_fp8: reload (dequantize=True) max|diff| = "
                  f"{reload_diff(qd, full2, logits2, quantization_config=FineGrainedFP8Config(dequantize=True))}")
        except Exception as e:  # noqa: BLE001
            print(f"{name}_fp8: reload check unavailable: {type(e).__name__}: {e}")
        print(f"{name}_fp8: files={sorted(os.listdir(qd))} min_margin={min(margins2):.4f}")


def make(out_root, name, cfg_cls, kwargs, shard, seed):
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
    prompt, full, logits, greedy, margins = run_golden(model, gen)
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    if shard:
        model.save_pretrained(d, safe_serialization=True, max_shard_size=shard)
    else:
        model.save_pretrained(d, safe_serialization=True)
    write_golden(d, prompt, logits, greedy, margins, seed, {})
    print(f"{name}: files={sorted(os.listdir(d))} min_margin={min(margins):.4f}")
    print(open(os.path.join(d, "config.json")).read())


SOURCES = [
    ("transformers.models.gpt2.modeling_gpt2", ["GPT2Attention", "GPT2MLP", "GPT2Block", "eager_attention_forward"]),
    ("transformers.models.qwen3_moe.modeling_qwen3_moe", None),
    ("transformers.models.gpt_oss.modeling_gpt_oss", None),
    ("transformers.models.deepseek_v3.modeling_deepseek_v3", None),
    ("transformers.modeling_rope_utils", ["_compute_yarn_parameters"]),
    ("transformers.integrations.mxfp4", ["convert_moe_packed_tensors"]),
    ("transformers.masking_utils", ["sliding_window_overlay", "causal_mask_function"]),
    ("transformers.conversion_mapping", None),
]


def dump_sources(path):
    import importlib
    import inspect
    with open(path, "w") as f:
        for mod, names in SOURCES:
            try:
                m = importlib.import_module(mod)
                if names is None:
                    f.write(f"##### {mod}\n{inspect.getsource(m)}\n")
                else:
                    for n in names:
                        f.write(f"##### {mod}.{n}\n{inspect.getsource(getattr(m, n))}\n")
            except Exception as e:  # noqa: BLE001
                f.write(f"##### {mod}: {type(e).__name__}: {e}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--sources", default="", help="write the relevant transformers source here")
    args = ap.parse_args()
    want = set(filter(None, args.cases.split(",")))
    torch.manual_seed(0)
    if args.sources:
        dump_sources(args.sources)
    failed = 0
    for i, (name, cls, kw, shard) in enumerate(cases()):
        if not want or name in want:
            make(args.out, name, cls, kw, shard, seed=1000 + i)
    for i, (name, cls, kw, opts) in enumerate(new_cases()):
        if want and name not in want:
            continue
        try:
            make_new(args.out, name, cls, kw, opts, seed=2000 + i)
        except Exception:  # noqa: BLE001 — one broken case must not hide the others
            failed += 1
            print(f"{name}: FAILED")
            traceback.print_exc()
    print(f"cases failed: {failed}")


if __name__ == "__main__":
    main()
