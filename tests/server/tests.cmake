# The HTTP server through the official `openai` npm client and raw HTTP (node:test), and the playground in
# headless Chromium. Each suite starts its own `ridgeline serve` on a free port and stops it with SIGTERM.
set(_srv_env RIDGELINE_BIN=$<TARGET_FILE:ridgeline> RIDGELINE_SOURCE_DIR=${PROJECT_SOURCE_DIR}
             RIDGELINE_SCREENSHOT=${CMAKE_BINARY_DIR}/playground.png)
if(RIDGELINE_SANITIZE)
  list(APPEND _srv_env RIDGELINE_SANITIZED=1)
endif()
foreach(_suite api concurrency hostile hostile_framing overload soak playground bench router_contract agents)
  add_test(NAME server_${_suite}
           COMMAND node --test ${CMAKE_CURRENT_SOURCE_DIR}/server/${_suite}.test.mjs)
  set_tests_properties(server_${_suite} PROPERTIES LABELS server TIMEOUT 180 ENVIRONMENT "${_srv_env}")
endforeach()
# Chromium can take a long time to come up on a loaded 2-core machine; the test waits up to 150 s for it.
set_tests_properties(server_playground PROPERTIES TIMEOUT 300)
