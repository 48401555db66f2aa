# Database and cache end-to-end tests (issue 36): real redis-server, PostgreSQL 15 and
# memcached started by the tests (tests/db/dblib.sh) on free loopback ports and temporary Unix
# sockets, their clients traced, collector-stub's JSON checked with jq. Label: integration.
if(TARGET swagent AND TARGET swagent-reporter AND TARGET collector-stub AND SW_E2E_BASH
   AND SW_E2E_JQ AND SW_E2E_PYTHON3)
  foreach(t redis postgresql memcached badinput modconf)
    if(EXISTS ${SW_TESTS_DIR}/db/${t}.sh)
      add_test(NAME db_${t} COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/db/${t}.sh)
      set_tests_properties(db_${t} PROPERTIES LABELS integration TIMEOUT 240
                           ENVIRONMENT "${SW_E2E_ENV};DB_DIR=${SW_TESTS_DIR}/db")
    endif()
  endforeach()
endif()
