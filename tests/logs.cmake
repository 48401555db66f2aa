# Logs (issue 38 item 5; docs/logs.md): the reporter's line assembly and log record parsing
# (agent/reporter/lineasm.c): test_lineasm (unit), the fuzz_logs target replayed over its corpus
# (replay_logs), and built as a libFuzzer target with a bounded run when SW_BUILD_FUZZERS=ON and
# the compiler is clang. End to end: tests/e2e/logs.sh (e2e_logs), logs_cap.sh (e2e_logs_cap).
set(SW_LOGS_AGENT ${PROJECT_SOURCE_DIR}/agent)
if(EXISTS ${SW_LOGS_AGENT}/reporter/lineasm.c)
  add_executable(test_lineasm ${SW_TESTS_DIR}/unit/test_lineasm.c
                 ${SW_LOGS_AGENT}/reporter/lineasm.c)
  target_include_directories(test_lineasm PRIVATE ${SW_LOGS_AGENT} ${SW_LOGS_AGENT}/reporter
                             ${SW_TESTS_DIR})
  add_test(NAME lineasm_unit COMMAND test_lineasm)
  set_tests_properties(lineasm_unit PROPERTIES LABELS unit TIMEOUT 60)

  add_executable(replay_logs ${SW_TESTS_DIR}/fuzz/fuzz_logs.c
                 ${SW_TESTS_DIR}/fuzz/replay_conf_prop.c ${SW_LOGS_AGENT}/reporter/lineasm.c)
  target_include_directories(replay_logs PRIVATE ${SW_LOGS_AGENT} ${SW_LOGS_AGENT}/reporter)
  add_test(NAME replay_logs COMMAND replay_logs ${SW_TESTS_DIR}/fuzz/corpus/logs)
  set_tests_properties(replay_logs PROPERTIES LABELS unit TIMEOUT 60)
  if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
    add_executable(fuzz_logs ${SW_TESTS_DIR}/fuzz/fuzz_logs.c ${SW_LOGS_AGENT}/reporter/lineasm.c)
    target_include_directories(fuzz_logs PRIVATE ${SW_LOGS_AGENT} ${SW_LOGS_AGENT}/reporter)
    target_compile_options(fuzz_logs PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_logs PRIVATE -fsanitize=fuzzer,address,undefined)
    set(work ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work_logs)
    file(MAKE_DIRECTORY ${work})
    add_test(NAME fuzz_logs COMMAND fuzz_logs -runs=200000 -max_total_time=20 -max_len=8192
                                    ${work} ${SW_TESTS_DIR}/fuzz/corpus/logs)
    set_tests_properties(fuzz_logs PROPERTIES LABELS fuzz TIMEOUT 120)
  endif()
endif()
