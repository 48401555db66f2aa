# tests/hardening.cmake - hardening tests (owner: hardening).
#
#   fuzz_conn    - the connection layer (agent/conn.c, proto_http1.c) write/read paths against a fake socket:
#                  a plain replay of the seed corpus always (label unit), a bounded libFuzzer
#                  run when built with clang and -DSW_BUILD_FUZZERS=ON (label fuzz).
#   hardening_*  - non-HTTP and hostile traffic on traced sockets of real programs (label
#                  preload): TLS, HTTP/2 preface, Redis/PostgreSQL bytes, random binary pass
#                  untouched with no spans; 64 KiB heads, bytewise heads, requests that never
#                  end: no crash, bounded RSS, the server keeps serving.
#   soak_rss     - RSS of a traced server stays flat over many keep-alive requests with the
#                  reporter and collector-stub running (label soak; SW_SOAK_REQUESTS sets the
#                  count, 100000 by default).
find_package(Threads REQUIRED)
set(SW_HARD_AGENT ${PROJECT_SOURCE_DIR}/agent)
set(SW_HARD_CONN_SRCS ${SW_TESTS_DIR}/fuzz/fuzz_conn.c ${SW_HARD_AGENT}/conn.c
    ${SW_HARD_AGENT}/proto_http1.c ${SW_HARD_AGENT}/proto_list.c ${SW_HARD_AGENT}/real.c
    ${SW_HARD_AGENT}/http.c)

function(sw_hard_conn_target name)
  target_include_directories(${name} PRIVATE ${SW_HARD_AGENT} ${SW_TESTS_DIR})
  target_compile_definitions(${name} PRIVATE SW_TESTING)
  # Everything else conn.c needs (config, log, guard state) comes from the core libraries; the
  # trace module is faked in fuzz_conn.c.
  target_link_libraries(${name} PRIVATE swagent_core swcommon dl Threads::Threads)
endfunction()

add_executable(replay_conn ${SW_HARD_CONN_SRCS} ${SW_TESTS_DIR}/fuzz/replay_conf_prop.c)
sw_hard_conn_target(replay_conn)
add_test(NAME replay_conn COMMAND replay_conn ${SW_TESTS_DIR}/fuzz/corpus/conn)
set_tests_properties(replay_conn PROPERTIES LABELS unit TIMEOUT 120)

if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_conn ${SW_HARD_CONN_SRCS})
  sw_hard_conn_target(fuzz_conn)
  target_compile_options(fuzz_conn PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_conn PRIVATE -fsanitize=fuzzer,address,undefined)
  set(work ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work_conn)
  file(MAKE_DIRECTORY ${work})
  add_test(NAME fuzz_conn
           COMMAND fuzz_conn -runs=200000 -max_total_time=20 -max_len=4096
                   ${work} ${SW_TESTS_DIR}/fuzz/corpus/conn)
  set_tests_properties(fuzz_conn PROPERTIES LABELS fuzz TIMEOUT 120)
endif()

# Hostile and non-HTTP traffic on traced sockets (real programs, reporter, collector-stub).
find_program(SW_HARD_PYTHON3 python3)
find_program(SW_HARD_JQ jq)
if(TARGET swagent AND TARGET swagent-reporter AND TARGET collector-stub AND SW_HARD_PYTHON3
   AND SW_HARD_JQ)
  set(SW_HARD_ENV "SWAGENT_LIB=$<TARGET_FILE:swagent>;REPORTER=$<TARGET_FILE:swagent-reporter>;STUB=$<TARGET_FILE:collector-stub>;HARD_DIR=${SW_TESTS_DIR}/hardening")
  foreach(c nonhttp tls bigheaders bytewise neverending)
    add_test(NAME hardening_${c} COMMAND sh ${SW_TESTS_DIR}/hardening/bad_input.sh ${c})
    set_tests_properties(hardening_${c} PROPERTIES LABELS preload TIMEOUT 180
                         ENVIRONMENT "${SW_HARD_ENV}")
  endforeach()
endif()

# Soak: RSS of a traced nginx worker over SW_SOAK_REQUESTS keep-alive requests (wrk). Label
# soak (100,000 requests take about 10 s, so it is part of the full suite).
find_program(SW_HARD_WRK wrk)
find_program(SW_HARD_NGINX nginx PATHS /usr/sbin /sbin)
if(TARGET swagent AND TARGET swagent-reporter AND TARGET collector-stub AND TARGET swagent-cli
   AND SW_HARD_WRK AND SW_HARD_NGINX AND SW_HARD_JQ)
  add_test(NAME soak_rss COMMAND sh ${SW_TESTS_DIR}/soak/soak_rss.sh)
  set_tests_properties(soak_rss PROPERTIES LABELS "soak;slow" TIMEOUT 900
                       ENVIRONMENT "${SW_HARD_ENV};SWAGENT_CLI=$<TARGET_FILE:swagent-cli>")
endif()
