# tests/stub_server.cmake - collector-stub server tests (owner: proto-stub).
# stub_smoke_client is a small grpc core client; stub_smoke.sh starts a stub per test on a
# free loopback port, runs client cases and checks the JSON lines with jq.
add_executable(stub_smoke_client ${SW_TESTS_DIR}/integration/stub_smoke_client.c)
target_link_libraries(stub_smoke_client PRIVATE swproto PkgConfig::GRPC PkgConfig::PROTOBUFC)

foreach(mode collect mgmt auth errors shutdown)
  add_test(NAME stub_smoke_${mode}
           COMMAND sh ${SW_TESTS_DIR}/integration/stub_smoke.sh $<TARGET_FILE:collector-stub>
                   $<TARGET_FILE:stub_smoke_client>
                   ${CMAKE_CURRENT_BINARY_DIR}/stub_smoke_${mode} ${mode})
  set_tests_properties(stub_smoke_${mode} PROPERTIES LABELS integration TIMEOUT 60)
endforeach()

# Unit test of the stub's JSON writer (json.c compiled in directly).
add_executable(test_stub_json ${SW_TESTS_DIR}/unit/test_stub_json.c
                              ${SW_TESTS_DIR}/../collector-stub/json.c)
target_include_directories(test_stub_json PRIVATE ${SW_TESTS_DIR} ${SW_TESTS_DIR}/../agent
                                                  ${SW_TESTS_DIR}/../collector-stub)
target_link_libraries(test_stub_json PRIVATE swproto)
add_test(NAME test_stub_json COMMAND test_stub_json)
set_tests_properties(test_stub_json PROPERTIES LABELS unit)
