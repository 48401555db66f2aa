# HTTPS tests (owner: tls; issue 35): real TLS programs on loopback under libswagent.so,
# certificates made by each test with openssl (tests/e2e/tls_lib.sh). Label: integration.
# tls_nb_client is a test program that links libssl (libswagent.so never does); without
# libssl-dev it is not built and e2e_tls_wantwrite fails saying so (scripts/deps.sh installs it).
pkg_check_modules(SW_TLS_OPENSSL IMPORTED_TARGET openssl)
if(SW_TLS_OPENSSL_FOUND)
  add_executable(tls_nb_client ${SW_TESTS_DIR}/e2e/tls_nb_client.c)
  target_link_libraries(tls_nb_client PRIVATE PkgConfig::SW_TLS_OPENSSL)
  set(SW_TLS_NB_CLIENT $<TARGET_FILE:tls_nb_client>)
else()
  set(SW_TLS_NB_CLIENT "")
endif()
if(DEFINED SW_E2E_ENV)
  foreach(t tls_nginx tls_clients tls_wantwrite tls_bad tls_status)
    add_test(NAME e2e_${t} COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/e2e/${t}.sh)
    set_tests_properties(e2e_${t} PROPERTIES LABELS integration TIMEOUT 180
                         ENVIRONMENT "${SW_E2E_ENV};TLS_NB_CLIENT=${SW_TLS_NB_CLIENT}")
  endforeach()
endif()
# fuzz_conn_tls: the connection layer's TLS entry points (tests/fuzz/fuzz_conn_tls.c, which
# includes fuzz_conn.c's fakes): a plain replay of the seed corpus always (label unit), a
# bounded libFuzzer run with clang and -DSW_BUILD_FUZZERS=ON (label fuzz).
if(COMMAND sw_hard_conn_target AND DEFINED SW_HARD_CONN_SRCS)
  set(SW_TLS_FUZZ_SRCS ${SW_HARD_CONN_SRCS})
  list(REMOVE_ITEM SW_TLS_FUZZ_SRCS ${SW_TESTS_DIR}/fuzz/fuzz_conn.c)
  list(APPEND SW_TLS_FUZZ_SRCS ${SW_TESTS_DIR}/fuzz/fuzz_conn_tls.c)
  if(EXISTS ${SW_HARD_AGENT}/conn_tls.c) # the TLS entry points, when kept apart from conn.c
    list(APPEND SW_TLS_FUZZ_SRCS ${SW_HARD_AGENT}/conn_tls.c)
  endif()
  add_executable(replay_conn_tls ${SW_TLS_FUZZ_SRCS} ${SW_TESTS_DIR}/fuzz/replay_conf_prop.c)
  sw_hard_conn_target(replay_conn_tls)
  add_test(NAME replay_conn_tls COMMAND replay_conn_tls ${SW_TESTS_DIR}/fuzz/corpus/conn_tls)
  set_tests_properties(replay_conn_tls PROPERTIES LABELS unit TIMEOUT 120)
  if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
    add_executable(fuzz_conn_tls ${SW_TLS_FUZZ_SRCS})
    sw_hard_conn_target(fuzz_conn_tls)
    target_compile_options(fuzz_conn_tls PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_conn_tls PRIVATE -fsanitize=fuzzer,address,undefined)
    set(work ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work_conn_tls)
    file(MAKE_DIRECTORY ${work})
    add_test(NAME fuzz_conn_tls
             COMMAND fuzz_conn_tls -runs=200000 -max_total_time=20 -max_len=4096
                     ${work} ${SW_TESTS_DIR}/fuzz/corpus/conn_tls)
    set_tests_properties(fuzz_conn_tls PROPERTIES LABELS fuzz TIMEOUT 120)
  endif()
endif()
