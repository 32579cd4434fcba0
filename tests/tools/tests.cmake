# tools/ncu_steps.py (folds an Nsight Compute CSV into per-step GPU time) on synthetic CSVs.
add_test(NAME tools_ncu_steps
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_ncu_steps.py ${PROJECT_SOURCE_DIR}/tools/ncu_steps.py)
set_tests_properties(tools_ncu_steps PROPERTIES LABELS tools PASS_REGULAR_EXPRESSION "ncu_steps: all checks passed")
# tools/nsys_gaps.py (a decode step's idle time between kernels, from an Nsight Systems GPU trace) on a synthetic
# trace.
add_test(NAME tools_nsys_gaps
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_nsys_gaps.py ${PROJECT_SOURCE_DIR}/tools/nsys_gaps.py)
set_tests_properties(tools_nsys_gaps PROPERTIES LABELS tools PASS_REGULAR_EXPRESSION "nsys_gaps: all checks passed")
