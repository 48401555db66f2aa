# tests/stub_pbwalk.cmake - collector-stub/pbwalk.c, the walker that counts a collectInSync
# SegmentCollection one segment at a time in --discard mode, against protobuf-c's unpack of the
# whole collection: a unit test (test_stub_pbwalk), a replay of the fuzz seed corpus, and a
# bounded libFuzzer run of the differential target when SW_BUILD_FUZZERS=ON and clang.
set(SW_PBWALK_SRC ${SW_TESTS_DIR}/../collector-stub/pbwalk.c)
set(SW_PBWALK_INC ${SW_TESTS_DIR} ${SW_TESTS_DIR}/../agent ${SW_TESTS_DIR}/../collector-stub)

add_executable(test_stub_pbwalk ${SW_TESTS_DIR}/unit/test_stub_pbwalk.c ${SW_PBWALK_SRC})
target_include_directories(test_stub_pbwalk PRIVATE ${SW_PBWALK_INC})
target_link_libraries(test_stub_pbwalk PRIVATE swproto)
add_test(NAME stub_pbwalk COMMAND test_stub_pbwalk)
set_tests_properties(stub_pbwalk PROPERTIES LABELS unit TIMEOUT 120)

add_executable(replay_stub_collection ${SW_TESTS_DIR}/fuzz/fuzz_stub_collection.c
               ${SW_TESTS_DIR}/fuzz/replay_conf_prop.c ${SW_PBWALK_SRC})
target_include_directories(replay_stub_collection PRIVATE ${SW_PBWALK_INC})
target_link_libraries(replay_stub_collection PRIVATE swproto)
add_test(NAME replay_stub_collection
         COMMAND replay_stub_collection ${SW_TESTS_DIR}/fuzz/corpus/stub_collection)
set_tests_properties(replay_stub_collection PROPERTIES LABELS unit TIMEOUT 60)

if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_stub_collection ${SW_TESTS_DIR}/fuzz/fuzz_stub_collection.c
                 ${SW_PBWALK_SRC})
  target_include_directories(fuzz_stub_collection PRIVATE ${SW_PBWALK_INC})
  target_compile_options(fuzz_stub_collection PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_stub_collection PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_stub_collection PRIVATE swproto)
  # New inputs go to a directory in the build tree, never into the source corpus.
  set(work ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work_stub_collection)
  file(MAKE_DIRECTORY ${work})
  add_test(NAME fuzz_stub_collection
           COMMAND fuzz_stub_collection -runs=500000 -max_total_time=20 -max_len=8192 ${work}
                   ${SW_TESTS_DIR}/fuzz/corpus/stub_collection)
  set_tests_properties(fuzz_stub_collection PROPERTIES LABELS fuzz TIMEOUT 120)
endif()
