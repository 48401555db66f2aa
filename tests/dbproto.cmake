# Database and cache protocol parsers (agent/proto_redis.c, proto_pg.c, proto_memcached.c):
# unit tests (exact events for every split of many conversations), fuzz replay over the seed
# corpora, and bounded libFuzzer runs when fuzzers are built (clang, -DSW_BUILD_FUZZERS=ON).
set(SW_DBPROTO_SRCS ${PROJECT_SOURCE_DIR}/agent/proto_redis.c ${PROJECT_SOURCE_DIR}/agent/proto_pg.c
    ${PROJECT_SOURCE_DIR}/agent/proto_memcached.c ${PROJECT_SOURCE_DIR}/agent/config.c
    ${PROJECT_SOURCE_DIR}/agent/log.c)

add_executable(test_dbproto ${SW_TESTS_DIR}/unit/test_dbproto.c ${SW_DBPROTO_SRCS})
target_include_directories(test_dbproto PRIVATE ${PROJECT_SOURCE_DIR}/agent ${SW_TESTS_DIR})
target_compile_definitions(test_dbproto PRIVATE SW_TESTING)
add_test(NAME dbproto_unit COMMAND test_dbproto)
set_tests_properties(dbproto_unit PROPERTIES LABELS unit TIMEOUT 120)

foreach(p redis pg memcached)
  add_executable(replay_db_${p} ${SW_TESTS_DIR}/fuzz/fuzz_db_${p}.c
                 ${SW_TESTS_DIR}/fuzz/replay_conf_prop.c ${SW_DBPROTO_SRCS})
  target_include_directories(replay_db_${p} PRIVATE ${PROJECT_SOURCE_DIR}/agent)
  target_compile_definitions(replay_db_${p} PRIVATE SW_TESTING)
  add_test(NAME replay_db_${p} COMMAND replay_db_${p} ${SW_TESTS_DIR}/fuzz/corpus/db_${p})
  set_tests_properties(replay_db_${p} PROPERTIES LABELS unit TIMEOUT 120)
  if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
    add_executable(fuzz_db_${p} ${SW_TESTS_DIR}/fuzz/fuzz_db_${p}.c ${SW_DBPROTO_SRCS})
    target_include_directories(fuzz_db_${p} PRIVATE ${PROJECT_SOURCE_DIR}/agent)
    target_compile_definitions(fuzz_db_${p} PRIVATE SW_TESTING)
    target_compile_options(fuzz_db_${p} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_db_${p} PRIVATE -fsanitize=fuzzer,address,undefined)
    add_test(NAME fuzz_db_${p}
             COMMAND sh -c "mkdir -p '${CMAKE_CURRENT_BINARY_DIR}/fuzz_db_${p}_corpus' && exec \
'$<TARGET_FILE:fuzz_db_${p}>' -runs=20000 -max_total_time=20 -max_len=4096 \
'${CMAKE_CURRENT_BINARY_DIR}/fuzz_db_${p}_corpus' '${SW_TESTS_DIR}/fuzz/corpus/db_${p}'")
    set_tests_properties(fuzz_db_${p} PROPERTIES LABELS fuzz TIMEOUT 120)
  endif()
endforeach()
