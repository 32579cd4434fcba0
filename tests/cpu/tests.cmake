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
# The KV cache dtype (runtime/kv_dtype.h): auto follows the weights (f32 -> f32, bf16 and int8 -> bf16), the
# --kv-cache-dtype override wins, and every cache decodes the first golden prompt to transformers' greedy ids on
# every tier (the bf16 cache through attn_group_bf16 on the AVX-512 tiers, dot_bf16/axpy_bf16 below them; the fp8
# cache through attn_span_fp8 on the AVX-512 tiers, the reference loop below them).
foreach(_isa scalar avx2 avx512 avx512_bf16 avx512_fp16)
  foreach(_kv f32 bf16 fp8)
    add_test(NAME cpu_isa_${_isa}_generate_golden_ids_kv_${_kv}
             COMMAND ${_rl} generate --prompt-ids "1153 261 2061" --output-ids --temperature 0 --max-tokens 8
                     --ignore-eos --kv-cache-dtype ${_kv})
    set_tests_properties(cpu_isa_${_isa}_generate_golden_ids_kv_${_kv} PROPERTIES
                         PASS_REGULAR_EXPRESSION "271 261 2850 451 271 261 1172 14\n"
                         ENVIRONMENT "RIDGELINE_CPU_ISA=${_isa}"
                         SKIP_REGULAR_EXPRESSION "is not supported by this CPU")
  endforeach()
endforeach()
foreach(_case "auto;--dtype;f32;f32" "auto;--dtype;bf16;bf16" "auto;--quantization;int8;bf16" "f32;--dtype;bf16;f32"
              "bf16;--dtype;f32;bf16" "fp8;--dtype;bf16;fp8")
  list(GET _case 0 _kv)
  list(GET _case 1 _flag)
  list(GET _case 2 _value)
  list(GET _case 3 _want)
  set(_name cli_kv_cache_dtype_${_kv}_${_value})
  add_test(NAME ${_name}
           COMMAND ${_rl} bench latency --batch 1 --input-len 8 --output-len 4 --kv-cache-dtype ${_kv}
                   ${_flag} ${_value})
  set_tests_properties(${_name} PROPERTIES PASS_REGULAR_EXPRESSION "KV cache: ${_want}\n")
endforeach()
add_test(NAME cli_kv_cache_dtype_unknown COMMAND ${_rl} generate --prompt hi --max-tokens 2 --kv-cache-dtype f16)
set_tests_properties(cli_kv_cache_dtype_unknown PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli_perplexity_kv_f32
         COMMAND ${_rl} perplexity --file ${PROJECT_SOURCE_DIR}/models/ridgeline-tiny/README.md --ctx 128
                 --max-chunks 2 --kv-cache-dtype f32)
set_tests_properties(cli_perplexity_kv_f32 PROPERTIES PASS_REGULAR_EXPRESSION "PPL = [0-9.]+ \\+/- [0-9.]+")
# bench cpu on a small matrix: the decode attention rows for both caches.
add_test(NAME cli_bench_cpu_attention
         COMMAND ${_rl} bench cpu --threads 1 --isa scalar --gemv-mib 8 --k 256 --reps 1 --attn-context 40)
set_tests_properties(cli_bench_cpu_attention PROPERTIES PASS_REGULAR_EXPRESSION
                     "attn_decode_f32 context=40 us_per_layer=[0-9.]+ GB/s=[0-9.]+\n.*attn_decode_bf16 context=40")
