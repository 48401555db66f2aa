# Protocol modules (issue 36): MySQL / MariaDB and FastCGI parsers. Unit tests with exact
# expected events over every split, fuzz targets replayed over their seed corpus in every
# build, and bounded libFuzzer runs when fuzzers are built (clang, -DSW_BUILD_FUZZERS=ON).
foreach(pr mysql fcgi)
  add_executable(test_${pr} ${SW_TESTS_DIR}/unit/test_${pr}.c ${PROJECT_SOURCE_DIR}/agent/${pr}.c)
  target_include_directories(test_${pr} PRIVATE ${PROJECT_SOURCE_DIR}/agent ${SW_TESTS_DIR})
  target_compile_definitions(test_${pr} PRIVATE SW_TESTING)
  add_test(NAME ${pr}_unit COMMAND test_${pr})
  set_tests_properties(${pr}_unit PROPERTIES LABELS unit TIMEOUT 300)

  add_executable(replay_${pr} ${SW_TESTS_DIR}/fuzz/fuzz_${pr}.c
                 ${SW_TESTS_DIR}/fuzz/replay_conf_prop.c ${PROJECT_SOURCE_DIR}/agent/${pr}.c)
  target_include_directories(replay_${pr} PRIVATE ${PROJECT_SOURCE_DIR}/agent)
  target_compile_definitions(replay_${pr} PRIVATE SW_TESTING)
  add_test(NAME replay_${pr} COMMAND replay_${pr} ${SW_TESTS_DIR}/fuzz/corpus/${pr})
  set_tests_properties(replay_${pr} PROPERTIES LABELS unit TIMEOUT 120)

  if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
    add_executable(fuzz_${pr} ${SW_TESTS_DIR}/fuzz/fuzz_${pr}.c ${PROJECT_SOURCE_DIR}/agent/${pr}.c)
    target_include_directories(fuzz_${pr} PRIVATE ${PROJECT_SOURCE_DIR}/agent)
    target_compile_definitions(fuzz_${pr} PRIVATE SW_TESTING)
    target_compile_options(fuzz_${pr} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_${pr} PRIVATE -fsanitize=fuzzer,address,undefined)
    # New inputs go to a directory in the build tree, never into the source corpus.
    set(work ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work_${pr})
    file(MAKE_DIRECTORY ${work})
    add_test(NAME fuzz_${pr}
             COMMAND fuzz_${pr} -runs=200000 -max_total_time=20 -max_len=8192
                     ${work} ${SW_TESTS_DIR}/fuzz/corpus/${pr})
    set_tests_properties(fuzz_${pr} PROPERTIES LABELS fuzz TIMEOUT 120)
  endif()
endforeach()

# Named exit spans and the spans of the parsers' events, read back from a real ring
# (test_trace.c's harness and record parser, and the reporter's encoder when it is built).
find_package(Threads REQUIRED)
set(SW_PT_AGENT ${PROJECT_SOURCE_DIR}/agent)
add_executable(test_proto_spans ${SW_TESTS_DIR}/unit/test_proto_spans.c ${SW_PT_AGENT}/trace.c
               ${SW_PT_AGENT}/propagation.c ${SW_PT_AGENT}/sampler.c ${SW_PT_AGENT}/id.c
               ${SW_PT_AGENT}/ring.c ${SW_PT_AGENT}/config.c ${SW_PT_AGENT}/log.c
               ${SW_PT_AGENT}/clock.c ${SW_PT_AGENT}/mysql.c ${SW_PT_AGENT}/fcgi.c
               ${SW_PT_AGENT}/proto_spans.c ${SW_PT_AGENT}/svcblock.c ${SW_PT_AGENT}/profile.c)
target_include_directories(test_proto_spans PRIVATE ${SW_PT_AGENT} ${SW_TESTS_DIR}
                           ${SW_TESTS_DIR}/unit)
target_compile_definitions(test_proto_spans PRIVATE SW_TESTING)
target_compile_options(test_proto_spans PRIVATE -ftls-model=initial-exec)
target_link_libraries(test_proto_spans PRIVATE Threads::Threads)
if(EXISTS ${SW_PT_AGENT}/reporter/encode.c AND TARGET swproto)
  target_sources(test_proto_spans PRIVATE ${SW_PT_AGENT}/reporter/encode.c)
  target_include_directories(test_proto_spans PRIVATE ${SW_PT_AGENT}/reporter)
  target_compile_definitions(test_proto_spans PRIVATE SW_TRACE_HAVE_ENCODE)
  target_link_libraries(test_proto_spans PRIVATE swproto)
endif()
add_test(NAME proto_spans COMMAND test_proto_spans)
set_tests_properties(proto_spans PROPERTIES LABELS unit TIMEOUT 120)

# Real servers from Debian (scripts/deps.sh): MariaDB with the mariadb client, python3-pymysql
# and PHP's PDO (tests/e2e/mariadb.sh); nginx -> PHP-FPM (Unix socket and TCP) -> MariaDB
# (tests/e2e/lemp.sh); servers that misbehave (tests/e2e/mysql_fcgi_bad.sh, proto_bad.py). Label
# integration; the e2e environment of tests/e2e.cmake.
if(DEFINED SW_E2E_ENV)
  foreach(t mariadb lemp mysql_fcgi_bad)
    add_test(NAME e2e_${t} COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/e2e/${t}.sh)
    set_tests_properties(e2e_${t} PROPERTIES LABELS integration TIMEOUT 180
                         ENVIRONMENT "${SW_E2E_ENV}")
  endforeach()
endif()
