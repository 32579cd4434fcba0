"""Writes a random-weight GGUF file of a Qwen3 config.json's shapes for llama.cpp's llama-bench (run by
bench/peers/llama_cpp.sh with PYTHONPATH at the gguf-py of the llama.cpp source bundled by node-llama-cpp).

usage: make_gguf.py CONFIG_JSON OUT_GGUF f16|q8_0

Weights are uniform in +-0.02*sqrt(3) (std 0.02, as ridgeline's --dummy-weights), norms 1. Matrices are F16 or
Q8_0 (the embedding too; the output layer is tied to it as in the config); norms F32. The vocabulary is a
placeholder SentencePiece-style list (<unk>, <s>, </s>, the 256 byte tokens, then tok<i>): llama-bench feeds
random token ids and never tokenises text, so only its size matters."""
import json
import sys

import numpy as np

import gguf


def main():
    config_path, out_path, kind = sys.argv[1], sys.argv[2], sys.argv[3]
    c = json.load(open(config_path))
    if c["architectures"][0] != "Qwen3ForCausalLM":
        sys.exit("make_gguf.py: only Qwen3ForCausalLM configs")
    qtype = {"f16": gguf.GGMLQuantizationType.F16, "q8_0": gguf.GGMLQuantizationType.Q8_0}[kind]
    h, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim", h // nh)
    rng = np.random.default_rng(0x5EED)
    scale = 0.02 * np.sqrt(3.0)

    w = gguf.GGUFWriter(out_path, "qwen3")
    w.add_name("random-" + kind)
    w.add_context_length(min(c["max_position_embeddings"], 4096))
    w.add_embedding_length(h)
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(inter)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_key_length(hd)
    w.add_value_length(hd)
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

    def matrix(name, rows, cols):
        a = rng.uniform(-scale, scale, size=(rows, cols)).astype(np.float32)
        if kind == "f16":
            w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)

    def norm(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    matrix("token_embd.weight", vocab, h)
    norm("output_norm.weight", h)
    for i in range(c["num_hidden_layers"]):
        p = "blk.%d." % i
        norm(p + "attn_norm.weight", h)
        matrix(p + "attn_q.weight", nh * hd, h)
        matrix(p + "attn_k.weight", nkv * hd, h)
        matrix(p + "attn_v.weight", nkv * hd, h)
        matrix(p + "attn_output.weight", h, nh * hd)
        norm(p + "attn_q_norm.weight", hd)
        norm(p + "attn_k_norm.weight", hd)
        norm(p + "ffn_norm.weight", h)
        matrix(p + "ffn_gate.weight", inter, h)
        matrix(p + "ffn_up.weight", inter, h)
        matrix(p + "ffn_down.weight", h, inter)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
