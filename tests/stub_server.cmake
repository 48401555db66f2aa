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
