# The CLI's tokenize/detokenize against the JS reference on real tokenizer folders (needs node + npm test tools:
# scripts/setup.sh). The gtest parity tests (rl_tests_tokenizer) run tests/tokenizer/reference.mjs themselves.
add_test(NAME tokenizer_cli_parity
         COMMAND node ${PROJECT_SOURCE_DIR}/tests/tokenizer/cli_test.mjs $<TARGET_FILE:ridgeline>
                 ${PROJECT_SOURCE_DIR}/tests/data/tokenizer/corpus.jsonl)
set_tests_properties(tokenizer_cli_parity PROPERTIES LABELS tokenizer TIMEOUT 300)
