# HTTP/2 and gRPC (issue 37; owner: h2core): the module (agent/proto_h2.c, hpack.c) through the
# connection layer with frames made by python3-h2 (agent_h2_unit), its fuzz target replayed over
# the seed corpus in every build and run by libFuzzer when fuzzers are built (clang,
# -DSW_BUILD_FUZZERS=ON), and a smoke test with nghttp2's client and server (e2e_h2_smoke).
find_package(Threads REQUIRED)
set(SW_H2_LAYER ${PROJECT_SOURCE_DIR}/agent/conn.c ${PROJECT_SOURCE_DIR}/agent/proto_http1.c
    ${PROJECT_SOURCE_DIR}/agent/proto_list.c ${PROJECT_SOURCE_DIR}/agent/real.c
    ${PROJECT_SOURCE_DIR}/agent/proto_h2.c ${PROJECT_SOURCE_DIR}/agent/hpack.c)
function(sw_h2_target name)
  target_compile_definitions(${name} PRIVATE SW_TESTING)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/agent ${SW_TESTS_DIR})
  # http.c, config, log and guard state from the core libraries; trace is faked.
  target_link_libraries(${name} PRIVATE swagent_core swcommon dl Threads::Threads)
endfunction()

add_executable(test_h2 ${SW_TESTS_DIR}/unit/test_h2.c ${SW_H2_LAYER})
sw_h2_target(test_h2)
add_test(NAME agent_h2_unit COMMAND sh ${SW_TESTS_DIR}/unit/h2_unit.sh $<TARGET_FILE:test_h2>
         ${SW_TESTS_DIR}/unit/h2_vectors.py)
set_tests_properties(agent_h2_unit PROPERTIES LABELS unit TIMEOUT 300)

add_executable(replay_h2 ${SW_TESTS_DIR}/fuzz/fuzz_h2.c ${SW_TESTS_DIR}/fuzz/replay_conf_prop.c
               ${SW_H2_LAYER})
sw_h2_target(replay_h2)
add_test(NAME replay_h2 COMMAND replay_h2 ${SW_TESTS_DIR}/fuzz/corpus/h2)
set_tests_properties(replay_h2 PROPERTIES LABELS unit TIMEOUT 120)

if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_h2 ${SW_TESTS_DIR}/fuzz/fuzz_h2.c ${SW_H2_LAYER})
  sw_h2_target(fuzz_h2)
  target_compile_options(fuzz_h2 PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_h2 PRIVATE -fsanitize=fuzzer,address,undefined)
  set(work ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work_h2)
  file(MAKE_DIRECTORY ${work})
  add_test(NAME fuzz_h2 COMMAND fuzz_h2 -runs=200000 -max_total_time=20 -max_len=8192
                                ${work} ${SW_TESTS_DIR}/fuzz/corpus/h2)
  set_tests_properties(fuzz_h2 PROPERTIES LABELS fuzz TIMEOUT 120)
endif()

# nghttp -m 100 -> nghttpd, both traced, and bench/h2_pair.c's gRPC-like calls (the e2e
# environment of tests/e2e.cmake).
if(DEFINED SW_E2E_ENV)
  add_executable(test_h2_pair ${PROJECT_SOURCE_DIR}/bench/h2_pair.c)
  add_test(NAME e2e_h2_smoke COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/e2e/h2_smoke.sh)
  set_tests_properties(e2e_h2_smoke PROPERTIES LABELS integration TIMEOUT 120
                       ENVIRONMENT "${SW_E2E_ENV};H2_PAIR=$<TARGET_FILE:test_h2_pair>")
endif()
