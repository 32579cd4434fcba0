# tools/ncu_steps.py (folds an Nsight Compute CSV into per-step GPU time) on synthetic CSVs.
add_test(NAME tools_ncu_steps
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_ncu_steps.py ${PROJECT_SOURCE_DIR}/tools/ncu_steps.py)
set_tests_properties(tools_ncu_steps PROPERTIES LABELS tools PASS_REGULAR_EXPRESSION "ncu_steps: all checks passed")
# tools/kernel_gaps.py (a decode step's idle time between kernels, from ridgeline's --profile-kernels trace or an
# Nsight Systems GPU trace) on synthetic traces of both kinds.
add_test(NAME tools_kernel_gaps
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_kernel_gaps.py ${PROJECT_SOURCE_DIR}/tools/kernel_gaps.py)
set_tests_properties(tools_kernel_gaps PROPERTIES LABELS tools PASS_REGULAR_EXPRESSION "kernel_gaps: all checks passed")
# tools/wait_order.py (where a Hopper kernel's wgmma waits land among its softmax instructions) on synthetic SASS.
add_test(NAME tools_wait_order
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_wait_order.py ${PROJECT_SOURCE_DIR}/tools/wait_order.py)
set_tests_properties(tools_wait_order PROPERTIES LABELS tools PASS_REGULAR_EXPRESSION "wait_order: all checks passed")
