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
# tools/smi_clocks.py (the SM clock, power and throttle reasons through a run, from an nvidia-smi CSV) on synthetic
# CSVs of both column sets the device scripts sample.
add_test(NAME tools_smi_clocks
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_smi_clocks.py ${PROJECT_SOURCE_DIR}/tools/smi_clocks.py)
set_tests_properties(tools_smi_clocks PROPERTIES LABELS tools PASS_REGULAR_EXPRESSION "smi_clocks: all checks passed")
