# perf-trace tests: trace.c's unchecked span writer and in-place names against the checked
# references (test hooks compiled with SW_TESTING).
set(SW_PT_AGENT ${PROJECT_SOURCE_DIR}/agent)
add_executable(test_trace_writer ${SW_TESTS_DIR}/unit/test_trace_writer.c ${SW_PT_AGENT}/trace.c
               ${SW_PT_AGENT}/propagation.c ${SW_PT_AGENT}/sampler.c ${SW_PT_AGENT}/svcblock.c ${SW_PT_AGENT}/id.c
               ${SW_PT_AGENT}/ring.c ${SW_PT_AGENT}/config.c ${SW_PT_AGENT}/log.c
               ${SW_PT_AGENT}/clock.c)
target_include_directories(test_trace_writer PRIVATE ${SW_PT_AGENT} ${SW_TESTS_DIR})
target_compile_definitions(test_trace_writer PRIVATE SW_TESTING)
target_compile_options(test_trace_writer PRIVATE -ftls-model=initial-exec)
target_link_libraries(test_trace_writer PRIVATE Threads::Threads)
add_test(NAME test_trace_writer COMMAND test_trace_writer)
set_tests_properties(test_trace_writer PROPERTIES LABELS unit TIMEOUT 120)
