# Tests of the interposition layer (owned by interpose): unit tests of conn.c (fd table,
# span events, sw8 insertion against a fake socket and a fake trace module) and preload tests
# running real programs under LD_PRELOAD=libswagent.so.
add_executable(test_conn ${SW_TESTS_DIR}/unit/test_conn.c ${PROJECT_SOURCE_DIR}/agent/conn.c
               ${PROJECT_SOURCE_DIR}/agent/real.c)
target_compile_definitions(test_conn PRIVATE SW_TESTING)
target_include_directories(test_conn PRIVATE ${PROJECT_SOURCE_DIR}/agent ${SW_TESTS_DIR})
# http.c (and the static libhttp_parser) come from the core library; trace is faked in the test.
target_link_libraries(test_conn PRIVATE swagent_core swcommon dl)
add_test(NAME agent_conn_unit COMMAND test_conn)
set_tests_properties(agent_conn_unit PROPERTIES LABELS unit TIMEOUT 120)
