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
