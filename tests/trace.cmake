# trace tests: agent/trace.c end to end through a real ring in a temporary directory.
#
# test_trace compiles the module sources it needs directly (with SW_TESTING, which exposes
# trace.c's test hooks) and replaces sw_spawn_reporter with a counting stub, so it depends on
# neither libswagent.so nor the reporter.
find_package(Threads REQUIRED)

set(SW_TRACE_AGENT ${PROJECT_SOURCE_DIR}/agent)
add_executable(test_trace ${SW_TESTS_DIR}/unit/test_trace.c ${SW_TRACE_AGENT}/trace.c
               ${SW_TRACE_AGENT}/propagation.c ${SW_TRACE_AGENT}/sampler.c ${SW_TRACE_AGENT}/svcblock.c
               ${SW_TRACE_AGENT}/id.c ${SW_TRACE_AGENT}/ring.c ${SW_TRACE_AGENT}/config.c
               ${SW_TRACE_AGENT}/log.c ${SW_TRACE_AGENT}/clock.c)
target_include_directories(test_trace PRIVATE ${SW_TRACE_AGENT} ${SW_TESTS_DIR})
target_compile_definitions(test_trace PRIVATE SW_TESTING)
target_compile_options(test_trace PRIVATE -ftls-model=initial-exec)
target_link_libraries(test_trace PRIVATE Threads::Threads)
add_test(NAME test_trace COMMAND test_trace)
set_tests_properties(test_trace PROPERTIES LABELS unit TIMEOUT 180)

# When the reporter's encoder exists, every record the test reads is also checked by it (the
# real consumer's parser), and one is encoded to protobuf and unpacked again.
if(EXISTS ${SW_TRACE_AGENT}/reporter/encode.c AND TARGET swproto)
  target_sources(test_trace PRIVATE ${SW_TRACE_AGENT}/reporter/encode.c)
  target_include_directories(test_trace PRIVATE ${SW_TRACE_AGENT}/reporter)
  target_compile_definitions(test_trace PRIVATE SW_TRACE_HAVE_ENCODE)
  target_link_libraries(test_trace PRIVATE swproto)
endif()
