# http module tests: unit (every split of many messages), fuzz replay over the seed corpus,
# and a bounded libFuzzer run when fuzzers are built (clang, -DSW_BUILD_FUZZERS=ON).

add_executable(test_http ${SW_TESTS_DIR}/unit/test_http.c ${PROJECT_SOURCE_DIR}/agent/http.c)
target_include_directories(test_http PRIVATE ${PROJECT_SOURCE_DIR}/agent ${SW_TESTS_DIR})
# SW_TESTING: http.c's fast-path hooks (a hit counter, a switch that turns the fast path off).
target_compile_definitions(test_http PRIVATE SW_TESTING)
add_test(NAME http_unit COMMAND test_http)
set_tests_properties(http_unit PROPERTIES LABELS unit TIMEOUT 300)

# The fuzz entry point, built as a plain replay executable over the seed corpus.
add_executable(fuzz_http_replay ${SW_TESTS_DIR}/fuzz/fuzz_http.c
               ${PROJECT_SOURCE_DIR}/agent/http.c)
target_include_directories(fuzz_http_replay PRIVATE ${PROJECT_SOURCE_DIR}/agent)
target_compile_definitions(fuzz_http_replay PRIVATE SW_FUZZ_REPLAY SW_TESTING)
add_test(NAME http_fuzz_replay
         COMMAND fuzz_http_replay ${SW_TESTS_DIR}/fuzz/corpus/http)
set_tests_properties(http_fuzz_replay PROPERTIES LABELS unit TIMEOUT 120)

if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_http ${SW_TESTS_DIR}/fuzz/fuzz_http.c ${PROJECT_SOURCE_DIR}/agent/http.c)
  target_include_directories(fuzz_http PRIVATE ${PROJECT_SOURCE_DIR}/agent)
  target_compile_definitions(fuzz_http PRIVATE SW_TESTING)
  target_compile_options(fuzz_http PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_http PRIVATE -fsanitize=fuzzer,address,undefined)
  # New inputs go to a scratch corpus in the build tree, never into the source tree.
  add_test(NAME http_fuzz
           COMMAND sh -c "mkdir -p '${CMAKE_CURRENT_BINARY_DIR}/fuzz_http_corpus' && exec \
'$<TARGET_FILE:fuzz_http>' -runs=20000 -max_total_time=20 -max_len=4096 \
'${CMAKE_CURRENT_BINARY_DIR}/fuzz_http_corpus' '${SW_TESTS_DIR}/fuzz/corpus/http'")
  set_tests_properties(http_fuzz PROPERTIES LABELS fuzz TIMEOUT 120)
endif()

# Differential test of the scanner's bulk paths against its byte-at-a-time path (whole vs one
# byte per call vs random splits over generated streams, a byte sweep and the fuzz corpus), of
# the whole-head fast path against the state machine (whole-buffer runs with it on and off), and
# of the SSE2 runs against the scalar loops (the same test built with SW_HTTP_NO_SIMD must print
# the same digest of its event logs).
add_executable(test_http_diff ${SW_TESTS_DIR}/unit/test_http_diff.c
               ${PROJECT_SOURCE_DIR}/agent/http.c)
target_include_directories(test_http_diff PRIVATE ${PROJECT_SOURCE_DIR}/agent ${SW_TESTS_DIR})
target_compile_definitions(test_http_diff PRIVATE SW_TESTING)
add_executable(test_http_diff_scalar ${SW_TESTS_DIR}/unit/test_http_diff.c
               ${PROJECT_SOURCE_DIR}/agent/http.c)
target_include_directories(test_http_diff_scalar PRIVATE ${PROJECT_SOURCE_DIR}/agent
                           ${SW_TESTS_DIR})
target_compile_definitions(test_http_diff_scalar PRIVATE SW_HTTP_NO_SIMD SW_TESTING)
add_test(NAME http_diff COMMAND test_http_diff ${SW_TESTS_DIR}/fuzz/corpus/http)
set_tests_properties(http_diff PROPERTIES LABELS unit TIMEOUT 300)
add_test(NAME http_diff_simd_vs_scalar
         COMMAND sh -c "a=$('$<TARGET_FILE:test_http_diff>' --digest '${SW_TESTS_DIR}/fuzz/corpus/http') && \
b=$('$<TARGET_FILE:test_http_diff_scalar>' --digest '${SW_TESTS_DIR}/fuzz/corpus/http') && \
echo \"simd $a scalar $b\" && test -n \"$a\" && test \"$a\" = \"$b\"")
set_tests_properties(http_diff_simd_vs_scalar PROPERTIES LABELS unit TIMEOUT 300)
