# The per-token mask benchmark (not a test; build it with --target bench_grammar_mask; see docs/benchmarks.md).
add_executable(bench_grammar_mask EXCLUDE_FROM_ALL ${PROJECT_SOURCE_DIR}/bench/grammar/bench_mask.cpp)
target_link_libraries(bench_grammar_mask PRIVATE rl_grammar rl_options)
target_compile_definitions(bench_grammar_mask PRIVATE RIDGELINE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
