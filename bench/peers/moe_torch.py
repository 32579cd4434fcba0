#!/usr/bin/env python3
"""Torch reference for the MoE expert layer: a loop over the active experts with F.linear (gate_up, activation,
down, weighted index_add), the way transformers' eager MoE blocks compute it, at the gpt-oss-20b and
Qwen3-30B-A3B expert shapes (bf16, H200). Same random-routing setup as tests/ops/test_moe_cuda.cpp's
CudaMoeBench. Prints one MOE_BENCH line per case (time per call, CUDA events, 50 iterations after 5 warm-ups).
"""
import torch
import torch.nn.functional as F

SHAPES = [("gpt-oss-20b", 32, 4, 2880, 2880, "swiglu_oss", True),
          ("Qwen3-30B-A3B", 128, 8, 2048, 768, "silu", False)]


def experts_loop(x, ids, wts, w1, b1, w2, b2, act):
    out = torch.zeros_like(x)
    for e in torch.unique(ids).tolist():
        tok, slot = torch.where(ids == e)
        h = F.linear(x[tok], w1[e], None if b1 is None else b1[e])
        g, u = h.chunk(2, dim=-1)
        if act == "silu":
            a = F.silu(g) * u
        else:
            g = g.clamp(max=7.0)
            u = u.clamp(-7.0, 7.0)
            a = (u + 1) * g * torch.sigmoid(1.702 * g)
        y = F.linear(a, w2[e], None if b2 is None else b2[e])
        out.index_add_(0, tok, y * wts[tok, slot, None].to(y.dtype))
    return out


def main():
    dev = "cuda"
    torch.manual_seed(0)
    for name, e, k, h, i, act, bias in SHAPES:
        w1 = (torch.rand(e, 2 * i, h, device=dev, dtype=torch.bfloat16) - 0.5) * 0.04
        w2 = (torch.rand(e, h, i, device=dev, dtype=torch.bfloat16) - 0.5) * 0.04
        b1 = torch.zeros(e, 2 * i, device=dev, dtype=torch.bfloat16) if bias else None
        b2 = torch.zeros(e, h, device=dev, dtype=torch.bfloat16) if bias else None
        for t in (1, 64, 512):
            x = torch.rand(t, h, device=dev, dtype=torch.bfloat16) * 2 - 1
            logits = torch.rand(t, e, device=dev) * 6 - 3
            wts, ids = torch.topk(torch.softmax(logits, -1), k, dim=-1)
            wts = wts / wts.sum(-1, keepdim=True)
            active = torch.unique(ids).numel()
            for _ in range(5):
                experts_loop(x, ids, wts, w1, b1, w2, b2, act)
            torch.cuda.synchronize()
            s, f = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(50):
                experts_loop(x, ids, wts, w1, b1, w2, b2, act)
            f.record()
            torch.cuda.synchronize()
            us = s.elapsed_time(f) * 1000 / 50
            gbps = active * 3 * h * i * 2 / us / 1e3
            print(f"MOE_BENCH torch {name} tokens={t} active_experts={active} time_us={us:.1f} weight_GBps={gbps:.0f}")


if __name__ == "__main__":
    main()
