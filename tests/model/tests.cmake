# CLI tests of the commands that run a model (the default model, on the CPU).
set(_rl ${CMAKE_BINARY_DIR}/ridgeline)
# The first golden prompt ("In the beginning") through `generate`: the same greedy ids as transformers.
add_test(NAME cli_generate_golden_ids
         COMMAND ${_rl} generate --prompt-ids "1153 261 2061" --output-ids --temperature 0 --max-tokens 8
                 --ignore-eos --dtype f32)
set_tests_properties(cli_generate_golden_ids PROPERTIES PASS_REGULAR_EXPRESSION "271 261 2850 451 271 261 1172 14\n")
add_test(NAME cli_generate_text COMMAND ${_rl} generate --prompt "In the beginning" --temperature 0 --max-tokens 12)
set_tests_properties(cli_generate_text PROPERTIES PASS_REGULAR_EXPRESSION "of the creation of the world")
add_test(NAME cli_generate_bad_ids COMMAND ${_rl} generate --prompt-ids "1 x 3")
set_tests_properties(cli_generate_bad_ids PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli_generate_bad_model COMMAND ${_rl} generate -m ${PROJECT_SOURCE_DIR}/tests/data --prompt hi)
set_tests_properties(cli_generate_bad_model PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli_chat_pipe
         COMMAND sh -c "printf 'Who begat Isaac?\\n/reset\\nAnd who was Moses?\\n/exit\\n' | ${_rl} chat --temperature 0 --max-tokens 16")
set_tests_properties(cli_chat_pipe PROPERTIES PASS_REGULAR_EXPRESSION "[A-Za-z]+.*\n.*[A-Za-z]+")
add_test(NAME cli_inspect_llama COMMAND ${_rl} inspect -m ${PROJECT_SOURCE_DIR}/models/configs/Llama-3.1-8B)
set_tests_properties(cli_inspect_llama PROPERTIES PASS_REGULAR_EXPRESSION "8030261248.*\n.*\n.*\n.*131072")
# bench latency with sampled requests (top-k + top-p through the sampler's radix selects), on the default model:
# exit status 0 and the TPOT and decode rows of a batch of 2; an out-of-range --top-p is refused.
add_test(NAME cli_bench_latency_sampled
         COMMAND sh -c "out=$(${_rl} bench latency --batch 2 --input-len 16 --output-len 8 --temperature 0.8 \
                 --top-k 20 --top-p 0.95) || exit 1; printf '%s\\n' \"$out\" | grep -Eq '^TPOT +2 ' && \
                 printf '%s\\n' \"$out\" | grep -Eq '^decode +2 '")
add_test(NAME cli_bench_latency_bad_top_p COMMAND ${_rl} bench latency --top-p 2)
set_tests_properties(cli_bench_latency_bad_top_p PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli_bench_throughput
         COMMAND ${_rl} bench throughput --num-prompts 8 --input-len 32 --output-len 8 --prefix-len 16)
set_tests_properties(cli_bench_throughput PROPERTIES PASS_REGULAR_EXPRESSION "Output token throughput")
add_test(NAME cli_dummy_weights_qwen3
         COMMAND ${_rl} generate -m ${PROJECT_SOURCE_DIR}/models/configs/Qwen3-0.6B --dummy-weights
                 --prompt-ids "1 2 3" --max-tokens 2 --ignore-eos --output-ids --kv-cache-gb 0.1 --max-model-len 256)
set_tests_properties(cli_dummy_weights_qwen3 PROPERTIES PASS_REGULAR_EXPRESSION "[0-9]+ [0-9]+\n")
foreach(_cmd generate chat inspect bench roofline tokenize detokenize template)
  add_test(NAME cli_help_${_cmd} COMMAND ${_rl} ${_cmd} --help)
endforeach()
add_test(NAME perf_cli_roofline
         COMMAND ${_rl} roofline --config ${PROJECT_SOURCE_DIR}/models/configs/Llama-3.1-8B/config.json)
set_tests_properties(perf_cli_roofline PROPERTIES PASS_REGULAR_EXPRESSION "8,030,261,248")
add_test(NAME perf_cli_unknown_gpu COMMAND ${_rl} roofline --gpu nope)
set_tests_properties(perf_cli_unknown_gpu PROPERTIES WILL_FAIL TRUE)
# The new architectures through the engine and the CLI (golden fixtures, f32 on the CPU): transformers' greedy ids.
set(_golden ${PROJECT_SOURCE_DIR}/tests/data/golden)
add_test(NAME cli_generate_gpt_oss_golden
         COMMAND ${_rl} generate -m ${_golden}/gpt_oss_mxfp4 --prompt-ids "134 129 114 243 44 142 63 36 97 292 169 71"
                 --output-ids --temperature 0 --max-tokens 8 --ignore-eos --dtype f32)
set_tests_properties(cli_generate_gpt_oss_golden PROPERTIES PASS_REGULAR_EXPRESSION "196 68 310 34 215 261 120 37\n")
add_test(NAME cli_generate_qwen3_moe_golden
         COMMAND ${_rl} generate -m ${_golden}/qwen3_moe --prompt-ids "109 60 57 292 112 67 286 301 48 152 316 255"
                 --output-ids --temperature 0 --max-tokens 8 --ignore-eos --dtype f32)
set_tests_properties(cli_generate_qwen3_moe_golden PROPERTIES PASS_REGULAR_EXPRESSION "169 243 172 96 96 96 208 118\n")
add_test(NAME cli_generate_gpt2_golden
         COMMAND ${_rl} generate -m ${_golden}/gpt2_tied --prompt-ids "280 254 144 122 222 220 241 199 78 129 176 208"
                 --output-ids --temperature 0 --max-tokens 8 --ignore-eos --dtype f32)
set_tests_properties(cli_generate_gpt2_golden PROPERTIES PASS_REGULAR_EXPRESSION "78 106 106 106 106 18 18 18\n")
# inspect and roofline of the MoE configs: totals, active parameters, windows, the MXFP4 note.
add_test(NAME cli_inspect_gpt_oss COMMAND ${_rl} inspect -m ${PROJECT_SOURCE_DIR}/models/configs/gpt-oss-20b)
set_tests_properties(cli_inspect_gpt_oss PROPERTIES PASS_REGULAR_EXPRESSION
                     "20914757184.*\n(.*\n)*active parameters +4193246784(.*\n)*.*window 128(.*\n)*note .*MXFP4")
# Hybrid KV: GPT-OSS's window layers keep only their windows, so a long sequence costs half the KV per token.
add_test(NAME cli_inspect_gpt_oss_kv_groups COMMAND ${_rl} inspect -m ${PROJECT_SOURCE_DIR}/models/configs/gpt-oss-20b)
set_tests_properties(cli_inspect_gpt_oss_kv_groups PROPERTIES PASS_REGULAR_EXPRESSION
                     "KV groups +full: 12 layers; window 128: 12 layers\n(.*\n)*KV cache bytes/token +24576 ")
add_test(NAME perf_cli_roofline_gpt_oss_kv_groups
         COMMAND ${_rl} roofline --config ${PROJECT_SOURCE_DIR}/models/configs/gpt-oss-20b/config.json)
set_tests_properties(perf_cli_roofline_gpt_oss_kv_groups PROPERTIES PASS_REGULAR_EXPRESSION
                     "KV cache bytes/token [(]long ctx[)] +24,576 [(]0.5 of all layers")
add_test(NAME perf_cli_roofline_moe
         COMMAND ${_rl} roofline --config ${PROJECT_SOURCE_DIR}/models/configs/Qwen3-30B-A3B/config.json)
set_tests_properties(perf_cli_roofline_moe PROPERTIES PASS_REGULAR_EXPRESSION "30,532,122,624 [(]30.53 B[)]\nmatmul parameters per token +3,041,656,832")
# DeepSeek (MLA): the KV cache holds one latent of 512 + 64 values per token and layer; MTP and FP8 notes. (One
# fact per test: CMake's regex backtracks exponentially on "(.*\n)*" over roofline's long output.)
add_test(NAME perf_cli_roofline_deepseek_v3
         COMMAND ${_rl} roofline --config ${PROJECT_SOURCE_DIR}/models/configs/DeepSeek-V3/config.json)
set_tests_properties(perf_cli_roofline_deepseek_v3 PROPERTIES PASS_REGULAR_EXPRESSION "KV bytes per token +70,272 [(]")
add_test(NAME perf_cli_roofline_deepseek_v3_mtp
         COMMAND ${_rl} roofline --config ${PROJECT_SOURCE_DIR}/models/configs/DeepSeek-V3/config.json)
set_tests_properties(perf_cli_roofline_deepseek_v3_mtp PROPERTIES PASS_REGULAR_EXPRESSION
                     "note +1 MTP module[(]s[)] [(]num_nextn_predict_layers, model.layers.61[+][)]: loaded when the checkpoint has them, unused")
add_test(NAME cli_inspect_deepseek_v2_lite
         COMMAND ${_rl} inspect -m ${PROJECT_SOURCE_DIR}/models/configs/DeepSeek-V2-Lite)
set_tests_properties(cli_inspect_deepseek_v2_lite PROPERTIES PASS_REGULAR_EXPRESSION
                     "KV bytes/token [(]bf16[)] 31104\nKV bytes/token [(]f32[)]  62208\n")
add_test(NAME cli_generate_deepseek_v3_fp8_golden
         COMMAND ${_rl} generate -m ${_golden}/deepseek_v3_fp8 --prompt-ids "14 216 212 13 43 61 279 75 113 138 296 246"
                 --output-ids --temperature 0 --max-tokens 8 --ignore-eos --dtype f32)
set_tests_properties(cli_generate_deepseek_v3_fp8_golden PROPERTIES PASS_REGULAR_EXPRESSION "199 233 19 199 30 159 19 184\n")
# Tensor parallelism (issue 19) on the CPU: two rank threads print the same text and ids as one; a size that does
# not divide the heads is a clear error and a non-zero exit.
add_test(NAME cli_generate_tp2_same_text
         COMMAND sh -c "a=$(${_rl} generate --prompt 'In the beginning' --temperature 0 --max-tokens 24 2>/dev/null) && b=$(${_rl} generate --prompt 'In the beginning' --temperature 0 --max-tokens 24 --tensor-parallel-size 2 2>/dev/null) && test -n \"$a\" && test \"$a\" = \"$b\" && echo \"same: $b\"")
set_tests_properties(cli_generate_tp2_same_text PROPERTIES PASS_REGULAR_EXPRESSION "same: .*of the creation of the world")
add_test(NAME cli_generate_tp2_golden_ids
         COMMAND ${_rl} generate --prompt-ids "1153 261 2061" --output-ids --temperature 0 --max-tokens 8
                 --ignore-eos --dtype f32 --tensor-parallel-size 2)
set_tests_properties(cli_generate_tp2_golden_ids PROPERTIES PASS_REGULAR_EXPRESSION "271 261 2850 451 271 261 1172 14\n")
# --profile-kernels: refused without --profile, and on the CPU (no kernel timestamps), each with its reason.
add_test(NAME cli_profile_kernels_needs_profile
         COMMAND sh -c "${_rl} generate --prompt hi --max-tokens 2 --profile-kernels 2>&1; echo \"exit=$?\"")
set_tests_properties(cli_profile_kernels_needs_profile PROPERTIES PASS_REGULAR_EXPRESSION
                     "--profile-kernels needs --profile FILE(.*\n)*exit=1\n")
add_test(NAME cli_profile_kernels_cpu_refused
         COMMAND sh -c "${_rl} generate --prompt hi --max-tokens 2 --profile ${CMAKE_BINARY_DIR}/cli_profile_kernels.json \
                 --profile-kernels 2>&1; echo \"exit=$?\"")
set_tests_properties(cli_profile_kernels_cpu_refused PROPERTIES PASS_REGULAR_EXPRESSION
                     "per-kernel timelines [(]--profile-kernels[)] need the CUDA backend(.*\n)*exit=1\n")
add_test(NAME cli_generate_tp3_invalid
         COMMAND sh -c "${_rl} generate --prompt hi --max-tokens 2 --tensor-parallel-size 3; echo \"exit=$?\"")
set_tests_properties(cli_generate_tp3_invalid PROPERTIES PASS_REGULAR_EXPRESSION
                     "tensor parallel size 3 does not divide num_attention_heads [(]4[)]\n(.*\n)*exit=1\n")
add_test(NAME cli_generate_tp_moe_refused
         COMMAND sh -c "${_rl} generate -m ${_golden}/qwen3_moe --prompt-ids '1 2 3' --max-tokens 2 --tensor-parallel-size 2; echo \"exit=$?\"")
set_tests_properties(cli_generate_tp_moe_refused PROPERTIES PASS_REGULAR_EXPRESSION
                     "Qwen3MoeForCausalLM runs on one rank only(.*\n)*exit=1\n")
# RIDGELINE_LOG sets the log level: info shows the tensor-parallel plan line, the default (warn) does not, and an
# unknown value is named in a warning and logs as warn.
add_test(NAME cli_log_level_env
         COMMAND sh -c "a=$(RIDGELINE_LOG=info ${_rl} generate --prompt hi --max-tokens 1 --tensor-parallel-size 2 2>&1 >/dev/null) && b=$(${_rl} generate --prompt hi --max-tokens 1 --tensor-parallel-size 2 2>&1 >/dev/null) && c=$(RIDGELINE_LOG=loud ${_rl} generate --prompt hi --max-tokens 1 --tensor-parallel-size 2 2>&1 >/dev/null) && echo \"info=$(echo \"$a\" | grep -c 'ridgeline: info: tensor parallel: 2 ranks') default=$(echo \"$b\" | grep -c 'ridgeline: info:') unknown=$(echo \"$c\" | grep -c 'ridgeline: info:') named=$(echo \"$c\" | grep -c 'RIDGELINE_LOG=loud is not one of')\"")
set_tests_properties(cli_log_level_env PROPERTIES PASS_REGULAR_EXPRESSION
                     "info=1 default=0 unknown=0 named=1\n")
add_test(NAME cli_inspect_llama_tp2
         COMMAND ${_rl} inspect -m ${PROJECT_SOURCE_DIR}/models/configs/Llama-3.1-8B --tensor-parallel-size 2)
set_tests_properties(cli_inspect_llama_tp2 PROPERTIES PASS_REGULAR_EXPRESSION
                     "per rank heads +16 / 4 [(]q / kv[)]\nper rank intermediate 7168\nper rank vocab rows +64128")
add_test(NAME perf_cli_roofline_tp2
         COMMAND ${_rl} roofline --config ${PROJECT_SOURCE_DIR}/models/configs/Llama-3.1-8B/config.json
                 --tensor-parallel-size 2)
set_tests_properties(perf_cli_roofline_tp2 PROPERTIES PASS_REGULAR_EXPRESSION "KV bytes/token/rank +65,536 [(]TP=1: 131,072[)]")
