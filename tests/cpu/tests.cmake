# The CPU backend on every kernel tier (src/backend/cpu/cpu_isa.h): RIDGELINE_CPU_ISA forces each tier in turn.
# A tier above this CPU's is skipped (the binary then warns "is not supported by this CPU").
set(_rl ${CMAKE_BINARY_DIR}/ridgeline)
foreach(_isa scalar avx2 avx512 avx512_bf16 avx512_fp16)
  # The golden tests of tests/model (tiny transformers checkpoints and the default model) on this tier.
  add_test(NAME cpu_isa_${_isa}_model_golden
           COMMAND rl_tests_model --gtest_filter=Fixtures/GoldenTest.*:TinyGoldenTest.*)
  # The default model's greedy ids as transformers gives them (f32 weights), and its text with bf16 and int8.
  add_test(NAME cpu_isa_${_isa}_generate_golden_ids
           COMMAND ${_rl} generate --prompt-ids "1153 261 2061" --output-ids --temperature 0 --max-tokens 8
                   --ignore-eos --dtype f32)
  set_tests_properties(cpu_isa_${_isa}_generate_golden_ids PROPERTIES
                       PASS_REGULAR_EXPRESSION "271 261 2850 451 271 261 1172 14\n")
  add_test(NAME cpu_isa_${_isa}_generate_int8
           COMMAND ${_rl} generate --prompt "In the beginning" --temperature 0 --max-tokens 12
                   --quantization int8)
  set_tests_properties(cpu_isa_${_isa}_generate_int8 PROPERTIES PASS_REGULAR_EXPRESSION "of the creation of the world")
  set_tests_properties(cpu_isa_${_isa}_model_golden cpu_isa_${_isa}_generate_golden_ids cpu_isa_${_isa}_generate_int8
                       PROPERTIES ENVIRONMENT "RIDGELINE_CPU_ISA=${_isa}"
                                  SKIP_REGULAR_EXPRESSION "is not supported by this CPU")
endforeach()
add_test(NAME cli_inspect_cpu_kernels COMMAND ${_rl} inspect)
set_tests_properties(cli_inspect_cpu_kernels PROPERTIES PASS_REGULAR_EXPRESSION "cpu kernels +[a-z0-9_]+ \\(")
add_test(NAME cli_help_names_cpu_kernels COMMAND ${_rl} --help)
set_tests_properties(cli_help_names_cpu_kernels PROPERTIES PASS_REGULAR_EXPRESSION "CPU kernels: [a-z0-9_]+")
# perplexity: the default model on the first chunk of the test fixture text, bf16 and int8 (numbers in docs/cpu.md).
foreach(_q none int8)
  add_test(NAME cli_perplexity_${_q}
           COMMAND ${_rl} perplexity --file ${PROJECT_SOURCE_DIR}/models/ridgeline-tiny/README.md --ctx 128
                   --max-chunks 2 --quantization ${_q})
  set_tests_properties(cli_perplexity_${_q} PROPERTIES PASS_REGULAR_EXPRESSION "PPL = [0-9.]+ \\+/- [0-9.]+")
endforeach()
add_test(NAME cli_perplexity_missing_file COMMAND ${_rl} perplexity --file /nonexistent/ridgeline.txt)
set_tests_properties(cli_perplexity_missing_file PROPERTIES WILL_FAIL TRUE)
