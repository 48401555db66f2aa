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
