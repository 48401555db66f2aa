# tests/stub_e2e.cmake - end-to-end tests of collector-stub (owner: tree-client).
# stub_client streams SegmentObjects (identity/gzip, one/many per stream, concurrent streams,
# auth, malformed messages, a known multi-service trace); stub_e2e.sh starts a stub per test on
# a free loopback port (--listen 127.0.0.1:0 --port-file), runs one case and checks the JSON
# lines field by field with jq, and `collector-stub tree` output against expected text.
add_executable(stub_client ${SW_TESTS_DIR}/integration/stub_client.c)
target_include_directories(stub_client PRIVATE ${PROJECT_SOURCE_DIR}/agent)
find_package(Threads REQUIRED)
target_link_libraries(stub_client PRIVATE swproto PkgConfig::GRPC PkgConfig::PROTOBUFC
                                          Threads::Threads)

set(SW_STUB_E2E_CASES identity gzip one many concurrent auth_ok auth_denied bad_protobuf
    bad_utf8 disconnect sigterm tree tree_fixtures)
foreach(case ${SW_STUB_E2E_CASES})
  add_test(NAME stub_e2e_${case}
           COMMAND sh ${SW_TESTS_DIR}/integration/stub_e2e.sh $<TARGET_FILE:collector-stub>
                   $<TARGET_FILE:stub_client> ${CMAKE_CURRENT_BINARY_DIR}/stub_e2e_${case}
                   ${case})
  set_tests_properties(stub_e2e_${case} PROPERTIES LABELS integration TIMEOUT 120)
endforeach()
