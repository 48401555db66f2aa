# tests/stub_pbwalk.cmake - collector-stub/pbwalk.c, the walker that counts a collectInSync
# SegmentCollection one segment at a time in --discard mode, against protobuf-c's unpack of the
# whole collection: a unit test (test_stub_pbwalk).
set(SW_PBWALK_SRC ${SW_TESTS_DIR}/../collector-stub/pbwalk.c)
set(SW_PBWALK_INC ${SW_TESTS_DIR} ${SW_TESTS_DIR}/../agent ${SW_TESTS_DIR}/../collector-stub)

add_executable(test_stub_pbwalk ${SW_TESTS_DIR}/unit/test_stub_pbwalk.c ${SW_PBWALK_SRC})
target_include_directories(test_stub_pbwalk PRIVATE ${SW_PBWALK_INC})
target_link_libraries(test_stub_pbwalk PRIVATE swproto)
add_test(NAME stub_pbwalk COMMAND test_stub_pbwalk)
set_tests_properties(stub_pbwalk PROPERTIES LABELS unit TIMEOUT 120)
