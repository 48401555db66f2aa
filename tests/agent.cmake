# Tests of the interposition layer (owned by interpose): unit tests of conn.c and its modules (fd table,
# span events, sw8 insertion against a fake socket and a fake trace module) and preload tests
# running real programs under LD_PRELOAD=libswagent.so.
add_executable(test_conn ${SW_TESTS_DIR}/unit/test_conn.c ${PROJECT_SOURCE_DIR}/agent/conn.c
               ${PROJECT_SOURCE_DIR}/agent/proto_http1.c ${PROJECT_SOURCE_DIR}/agent/proto_list.c
               ${PROJECT_SOURCE_DIR}/agent/real.c)
target_compile_definitions(test_conn PRIVATE SW_TESTING)
target_include_directories(test_conn PRIVATE ${PROJECT_SOURCE_DIR}/agent ${SW_TESTS_DIR})
# http.c comes from the core library; trace is faked in the test.
find_package(Threads REQUIRED)
target_link_libraries(test_conn PRIVATE swagent_core swcommon dl Threads::Threads)
add_test(NAME agent_conn_unit COMMAND test_conn)
set_tests_properties(agent_conn_unit PROPERTIES LABELS unit TIMEOUT 120)
# The module interface (agent/proto.h) with a test module of its own (its own module list).
add_executable(test_proto ${SW_TESTS_DIR}/unit/test_proto.c ${PROJECT_SOURCE_DIR}/agent/conn.c
               ${PROJECT_SOURCE_DIR}/agent/proto_http1.c ${PROJECT_SOURCE_DIR}/agent/real.c)
target_compile_definitions(test_proto PRIVATE SW_TESTING)
target_include_directories(test_proto PRIVATE ${PROJECT_SOURCE_DIR}/agent ${SW_TESTS_DIR})
target_link_libraries(test_proto PRIVATE swagent_core swcommon dl Threads::Threads)
add_test(NAME agent_proto_unit COMMAND test_proto)
set_tests_properties(agent_proto_unit PROPERTIES LABELS unit TIMEOUT 120)

# Preload tests: real programs (python3 servers, curl, a C client) under LD_PRELOAD.
if(TARGET swagent)
  # The request path's functions are grouped in the library's text (SW_HOT, SW_HOT_PATH); the
  # size bound only without sanitizers (their instrumented code is 2-4 times larger).
  if(SW_SANITIZE)
    set(SW_HOT_PATH_MAX_KIB 0)
  else()
    set(SW_HOT_PATH_MAX_KIB 24)
  endif()
  add_test(NAME agent_hot_layout COMMAND sh ${SW_TESTS_DIR}/preload/hot_layout.sh
           $<TARGET_FILE:swagent> ${SW_HOT_PATH_MAX_KIB})
  set_tests_properties(agent_hot_layout PROPERTIES LABELS unit TIMEOUT 30)
  add_executable(preload_http_client ${SW_TESTS_DIR}/preload/http_client.c)
  target_link_libraries(preload_http_client PRIVATE Threads::Threads)
  add_library(preload_early_hook SHARED ${SW_TESTS_DIR}/preload/early_hook.c)
  set(SW_PRELOAD_CASES sw8_bytewise sw8_keepalive sw8_pipeline sw8_post sw8_fork
      sw8_forkexec sw8_dup sw8_close_range sw8_threads control_no_agent disabled exclude_port raw traced_server
      http_server_curl ctor_hook nginx unix)
  foreach(c ${SW_PRELOAD_CASES})
    add_test(NAME preload_${c} COMMAND sh ${SW_TESTS_DIR}/preload/run_preload.sh ${c})
    set_tests_properties(preload_${c} PROPERTIES LABELS preload TIMEOUT 120
      ENVIRONMENT "SWAGENT_LIB=$<TARGET_FILE:swagent>;HTTP_CLIENT=$<TARGET_FILE:preload_http_client>;EARLY_LIB=$<TARGET_FILE:preload_early_hook>;PRELOAD_DIR=${SW_TESTS_DIR}/preload")
  endforeach()
endif()
