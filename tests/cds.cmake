# CDS tests (issue 38): the reporter's handling of OAP's ConfigurationDiscoveryService answers
# (agent/reporter/cds.c) into a real shared block (agent/svcblock.c): test_cds (unit), the
# fuzz_cds target (any bytes as the answer) replayed over its corpus, and built as a libFuzzer
# target with a bounded run when SW_BUILD_FUZZERS=ON and the compiler is clang. End to end:
# tests/e2e/cds.sh (e2e_cds), quota_nginx.sh, svc_corrupt.sh.
set(SW_CDS_AGENT ${PROJECT_SOURCE_DIR}/agent)
set(SW_CDS_SRCS ${SW_CDS_AGENT}/reporter/cds.c ${SW_CDS_AGENT}/svcblock.c ${SW_CDS_AGENT}/config.c
                ${SW_CDS_AGENT}/log.c)
if(TARGET swproto AND EXISTS ${SW_CDS_AGENT}/reporter/cds.c)
  add_executable(test_cds ${SW_TESTS_DIR}/unit/test_cds.c ${SW_CDS_SRCS}
                 ${SW_TESTS_DIR}/unit/cds_transport_stub.c)
  target_include_directories(test_cds PRIVATE ${SW_CDS_AGENT} ${SW_CDS_AGENT}/reporter ${SW_TESTS_DIR})
  target_compile_definitions(test_cds PRIVATE SW_TESTING)
  target_link_libraries(test_cds PRIVATE swproto PkgConfig::PROTOBUFC)
  add_test(NAME test_cds COMMAND test_cds)
  set_tests_properties(test_cds PROPERTIES LABELS unit TIMEOUT 60)

  add_executable(replay_cds ${SW_TESTS_DIR}/fuzz/fuzz_cds.c ${SW_TESTS_DIR}/fuzz/replay_conf_prop.c
                 ${SW_CDS_SRCS} ${SW_TESTS_DIR}/unit/cds_transport_stub.c)
  target_include_directories(replay_cds PRIVATE ${SW_CDS_AGENT} ${SW_CDS_AGENT}/reporter)
  target_compile_definitions(replay_cds PRIVATE SW_TESTING)
  target_link_libraries(replay_cds PRIVATE swproto PkgConfig::PROTOBUFC)
  add_test(NAME replay_cds COMMAND replay_cds ${SW_TESTS_DIR}/fuzz/corpus/cds)
  set_tests_properties(replay_cds PROPERTIES LABELS unit TIMEOUT 60)
  if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
    add_executable(fuzz_cds ${SW_TESTS_DIR}/fuzz/fuzz_cds.c ${SW_CDS_SRCS}
                   ${SW_TESTS_DIR}/unit/cds_transport_stub.c)
    target_include_directories(fuzz_cds PRIVATE ${SW_CDS_AGENT} ${SW_CDS_AGENT}/reporter)
    target_compile_definitions(fuzz_cds PRIVATE SW_TESTING)
    target_compile_options(fuzz_cds PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_cds PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_cds PRIVATE swproto PkgConfig::PROTOBUFC)
    set(work ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work_cds)
    file(MAKE_DIRECTORY ${work})
    add_test(NAME fuzz_cds COMMAND fuzz_cds -runs=200000 -max_total_time=20 -max_len=8192 ${work}
                                   ${SW_TESTS_DIR}/fuzz/corpus/cds)
    set_tests_properties(fuzz_cds PROPERTIES LABELS fuzz TIMEOUT 120)
  endif()
endif()

# The reporter's removal of shared blocks no process maps (agent/reporter/svcgc.c).
add_executable(test_svcgc ${SW_TESTS_DIR}/unit/test_svcgc.c ${SW_CDS_AGENT}/reporter/svcgc.c
               ${SW_CDS_AGENT}/svcblock.c ${SW_CDS_AGENT}/config.c ${SW_CDS_AGENT}/log.c)
target_include_directories(test_svcgc PRIVATE ${SW_CDS_AGENT} ${SW_CDS_AGENT}/reporter ${SW_TESTS_DIR})
target_compile_definitions(test_svcgc PRIVATE SW_TESTING)
add_test(NAME test_svcgc COMMAND test_svcgc)
set_tests_properties(test_svcgc PROPERTIES LABELS unit TIMEOUT 60)
