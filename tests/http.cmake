# http module tests: unit (every split of many messages), fuzz replay over the seed corpus,
# and a bounded libFuzzer run when fuzzers are built (clang, -DSW_BUILD_FUZZERS=ON).

add_executable(test_http ${SW_TESTS_DIR}/unit/test_http.c ${PROJECT_SOURCE_DIR}/agent/http.c)
target_include_directories(test_http PRIVATE ${PROJECT_SOURCE_DIR}/agent ${SW_TESTS_DIR})
add_test(NAME http_unit COMMAND test_http)
set_tests_properties(http_unit PROPERTIES LABELS unit TIMEOUT 300)

# The fuzz entry point, built as a plain replay executable over the seed corpus.
add_executable(fuzz_http_replay ${SW_TESTS_DIR}/fuzz/fuzz_http.c
               ${PROJECT_SOURCE_DIR}/agent/http.c)
target_include_directories(fuzz_http_replay PRIVATE ${PROJECT_SOURCE_DIR}/agent)
target_compile_definitions(fuzz_http_replay PRIVATE SW_FUZZ_REPLAY)
add_test(NAME http_fuzz_replay
         COMMAND fuzz_http_replay ${SW_TESTS_DIR}/fuzz/corpus/http)
set_tests_properties(http_fuzz_replay PROPERTIES LABELS unit TIMEOUT 120)

if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_http ${SW_TESTS_DIR}/fuzz/fuzz_http.c ${PROJECT_SOURCE_DIR}/agent/http.c)
  target_include_directories(fuzz_http PRIVATE ${PROJECT_SOURCE_DIR}/agent)
  target_compile_options(fuzz_http PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_http PRIVATE -fsanitize=fuzzer,address,undefined)
  # New inputs go to a scratch corpus in the build tree, never into the source tree.
  add_test(NAME http_fuzz
           COMMAND sh -c "mkdir -p '${CMAKE_CURRENT_BINARY_DIR}/fuzz_http_corpus' && exec \
'$<TARGET_FILE:fuzz_http>' -runs=20000 -max_total_time=20 -max_len=4096 \
'${CMAKE_CURRENT_BINARY_DIR}/fuzz_http_corpus' '${SW_TESTS_DIR}/fuzz/corpus/http'")
  set_tests_properties(http_fuzz PROPERTIES LABELS fuzz TIMEOUT 120)
endif()
