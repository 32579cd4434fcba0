# Fuzz targets: every tests/fuzz/fuzz_<name>.cpp defines LLVMFuzzerTestOneInput and may name the libraries it
# needs on a line `// fuzz-libs: rl_loader rl_chat` (default: rl_loader rl_tokenizer rl_chat).
#  - fuzz and asan presets (RIDGELINE_FUZZ): one libFuzzer binary per file, build/<preset>/fuzz_<name>; run
#    them with scripts/fuzz.sh <name> SECONDS on tests/fuzz/corpus/<name>; ctest replays the corpus with -runs=0.
#  - every other preset: the same file linked with replay_main.cpp replays its corpus as a ctest
#    (fuzz_replay.<name>), so each seed and every committed regression input runs under the asan preset too.
file(GLOB rl_fuzz_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz_*.cpp)
if(RIDGELINE_FUZZ)
  add_custom_target(rl_fuzz_all)
endif()
foreach(src ${rl_fuzz_srcs})
  get_filename_component(name ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" short ${name})
  file(STRINGS ${src} libs_line REGEX "^// fuzz-libs:" LIMIT_COUNT 1)
  if(libs_line)
    string(REGEX REPLACE "^// fuzz-libs:[ ]*" "" libs "${libs_line}")
    separate_arguments(libs)
  else()
    set(libs rl_loader rl_tokenizer rl_chat)
  endif()
  if(RIDGELINE_FUZZ)
    add_executable(${name} ${src})
    target_link_libraries(${name} PRIVATE ${libs} rl_options)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    target_compile_definitions(${name} PRIVATE RIDGELINE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    add_dependencies(rl_fuzz_all ${name})
    # The fuzz binary replays its corpus once (-runs=0): the same check as the other presets' replay test,
    # so a build with both RIDGELINE_FUZZ and RIDGELINE_SANITIZE (the asan preset) runs it under ctest too.
    add_test(NAME fuzz_replay.${short} COMMAND ${name} -runs=0 ${CMAKE_CURRENT_LIST_DIR}/corpus/${short})
    set_tests_properties(fuzz_replay.${short} PROPERTIES LABELS fuzz TIMEOUT 300)
  else()
    add_executable(${name}_replay ${src} ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp)
    target_link_libraries(${name}_replay PRIVATE ${libs} rl_options)
    target_compile_definitions(${name}_replay PRIVATE RIDGELINE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    add_test(NAME fuzz_replay.${short} COMMAND ${name}_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/${short})
    set_tests_properties(fuzz_replay.${short} PROPERTIES LABELS fuzz TIMEOUT 300)
  endif()
endforeach()
