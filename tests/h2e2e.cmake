# HTTP/2 and gRPC tests with real programs (owner: h2e2e; issue 37; the module's unit and fuzz
# tests are in h2.cmake): programs from Debian's packages (python3-grpcio, nghttp2-server/
# -client, python3-h2, curl, nginx) under libswagent.so on loopback, certificates made by each
# test (tests/e2e/tls_lib.sh), collector-stub checked with jq. Scripts: tests/h2/. Label:
# integration.
if(DEFINED SW_E2E_ENV)
  foreach(t grpc nghttp nginx bad attrib)
    add_test(NAME h2_${t} COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/h2/${t}.sh)
    set_tests_properties(h2_${t} PROPERTIES LABELS integration TIMEOUT 180
                         ENVIRONMENT "${SW_E2E_ENV};H2_DIR=${SW_TESTS_DIR}/h2")
  endforeach()
endif()
