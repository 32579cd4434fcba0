"""Writes a random-weight GGUF file of a Qwen3 or Llama config.json's shapes for llama.cpp's llama-bench (run by
bench/peers/llama_cpp.sh and scripts/device/peer_llama_gpu.sh with PYTHONPATH at the gguf-py of the llama.cpp source
bundled by node-llama-cpp).

usage: make_gguf.py CONFIG_JSON OUT_GGUF f16|q8_0

Weights are uniform in +-0.02*sqrt(3) (std 0.02, as ridgeline's --dummy-weights), norms 1. Matrices are F16 or
Q8_0 (the embedding too; the output layer is tied to it where the config says so, else its own matrix); norms F32;
Llama 3's rope scaling as llama.cpp's rope_freqs tensor. The vocabulary is a placeholder SentencePiece-style list
(<unk>, <s>, </s>, the 256 byte tokens, then tok<i>): llama-bench feeds random token ids and never tokenises text,
so only its size matters.

The file is streamed, one tensor at a time, never held in memory. F16 matrices repeat one 64 MiB block of random
values from a different offset in each tensor (a Llama-3.1-8B file of 16 GB is written at disk speed, not numpy's
random-number speed); Q8_0 matrices are drawn afresh and quantised (slow: meant for small models)."""
import json
import math
import sys

import numpy as np

import gguf

BLOCK = 32 << 20  # F16 values in the repeated random block: 64 MiB


def llama3_rope_factors(c, hd):
    """llama.cpp's rope_freqs for rope_type llama3, as convert_hf_to_gguf.py computes them."""
    rs = c["rope_scaling"]
    factor, low, high = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs["original_max_position_embeddings"]
    out = []
    for i in range(0, hd, 2):
        wavelen = 2 * math.pi * float(c["rope_theta"]) ** (i / hd)
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def main():
    config_path, out_path, kind = sys.argv[1], sys.argv[2], sys.argv[3]
    c = json.load(open(config_path))
    arch = {"Qwen3ForCausalLM": "qwen3", "LlamaForCausalLM": "llama"}.get(c["architectures"][0])
    if arch is None:
        sys.exit("make_gguf.py: only Qwen3ForCausalLM and LlamaForCausalLM configs")
    qtype = {"f16": gguf.GGMLQuantizationType.F16, "q8_0": gguf.GGMLQuantizationType.Q8_0}[kind]
    h, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or h // nh
    rng = np.random.default_rng(0x5EED)
    scale = 0.02 * np.sqrt(3.0)

    w = gguf.GGUFWriter(out_path, arch)
    w.add_name("random-" + kind)
    w.add_context_length(min(c["max_position_embeddings"], 4096))
    w.add_embedding_length(h)
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(inter)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(float(c.get("rope_theta", 1e6)))
    w.add_layer_norm_rms_eps(float(c["rms_norm_eps"]))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if kind == "f16" else gguf.LlamaFileType.MOSTLY_Q8_0)
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    tokens += ["tok%d" % i for i in range(vocab - len(tokens))]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    types += [gguf.TokenType.NORMAL] * (vocab - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    # The tensors, in file order: (name, shape as numpy's (rows, cols), values: None for a random matrix, or an array).
    tensors = []

    def matrix(name, rows, cols):
        tensors.append((name, (rows, cols), None))

    def norm(name, n):
        tensors.append((name, (n,), np.ones(n, dtype=np.float32)))

    matrix("token_embd.weight", vocab, h)
    norm("output_norm.weight", h)
    if not c.get("tie_word_embeddings", False):
        matrix("output.weight", vocab, h)
    if (c.get("rope_scaling") or {}).get("rope_type") == "llama3":
        tensors.append(("rope_freqs.weight", (hd // 2,), llama3_rope_factors(c, hd)))
    for i in range(c["num_hidden_layers"]):
        p = "blk.%d." % i
        norm(p + "attn_norm.weight", h)
        matrix(p + "attn_q.weight", nh * hd, h)
        matrix(p + "attn_k.weight", nkv * hd, h)
        matrix(p + "attn_v.weight", nkv * hd, h)
        matrix(p + "attn_output.weight", h, nh * hd)
        if arch == "qwen3":
            norm(p + "attn_q_norm.weight", hd)
            norm(p + "attn_k_norm.weight", hd)
        norm(p + "ffn_norm.weight", h)
        matrix(p + "ffn_gate.weight", inter, h)
        matrix(p + "ffn_up.weight", inter, h)
        matrix(p + "ffn_down.weight", h, inter)

    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    for name, shape, values in tensors:
        if values is not None:
            w.add_tensor_info(name, shape, values.dtype, values.nbytes)
        elif kind == "f16":
            w.add_tensor_info(name, shape, np.dtype(np.float16), shape[0] * shape[1] * 2)
        else:
            byte_shape = (shape[0], shape[1] // block_size * type_size)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), byte_shape[0] * byte_shape[1], raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]

    block = None
    if kind == "f16":
        block = rng.uniform(-scale, scale, size=BLOCK).astype(np.float16)
        assert np.isfinite(block).all() and block.min() < 0 < block.max(), "bad random block"

    def pad():
        w.write_padding(fout, fout.tell())

    for t, (name, shape, values) in enumerate(tensors):
        pad()
        start = fout.tell()
        if values is not None:
            values.tofile(fout)
        elif kind == "f16":
            n = shape[0] * shape[1]
            off = (t * 1000003 + 7) % BLOCK  # a different phase in each tensor
            while n > 0:
                take = min(n, BLOCK - off)
                block[off:off + take].tofile(fout)
                n -= take
                off = 0
        else:
            a = rng.uniform(-scale, scale, size=shape).astype(np.float32)
            gguf.quants.quantize(a, qtype).tofile(fout)
        expect = w.tensors[0][name].nbytes
        if fout.tell() - start != expect:
            sys.exit("make_gguf.py: %s wrote %d bytes, expected %d" % (name, fout.tell() - start, expect))
    pad()
    w.close()


if __name__ == "__main__":
    main()
