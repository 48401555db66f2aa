# Tests against a real Apache SkyWalking OAP 10.1.0 (owner: oap; label: oap): scripts/oap.sh
# downloads its jars from Maven Central once (a cache shared by the tests, the demo and users),
# starts it on kernel-chosen loopback ports with its state in the test's temp dir, and the test
# checks through the OAP's GraphQL API what the UI would show. The first run downloads ~155 MB.
# Without java, mvn or the other tools the tests are not registered (a vanished test in CI);
# without Maven Central (the jars cannot be had) they skip (exit 77, not allowlisted).
# Stage 1 only: one OAP start is ~15-25 s and ~400 MB of a JVM.
find_program(SW_OAP_JAVA java)
find_program(SW_OAP_MVN mvn)
find_program(SW_OAP_NGINX nginx PATHS /usr/sbin /sbin)
find_program(SW_OAP_SS ss PATHS /usr/bin /bin /usr/sbin)
if(TARGET swagent AND TARGET swagent-reporter AND TARGET swagent-cli AND SW_E2E_BASH AND SW_E2E_JQ
   AND SW_E2E_CURL AND SW_E2E_PYTHON3 AND SW_OAP_JAVA AND SW_OAP_MVN AND SW_OAP_NGINX AND SW_OAP_SS)
  set(SW_OAP_ENV
      "SWAGENT_LIB=$<TARGET_FILE:swagent>"
      "SWAGENT_CLI=$<TARGET_FILE:swagent-cli>"
      "SWAGENT_REPORTER=$<TARGET_FILE:swagent-reporter>"
      "COLLECTOR_STUB=$<TARGET_FILE:collector-stub>"
      "E2E_DIR=${SW_TESTS_DIR}/e2e"
      "OAP_DIR=${SW_TESTS_DIR}/oap"
      "OAP_SH=${PROJECT_SOURCE_DIR}/scripts/oap.sh"
      "BUILD_DIR=${PROJECT_BINARY_DIR}")
  # oap_demo: the demo chain, read back through GraphQL; oap_restart: the OAP stopped and
  # started again mid-test, nothing lost on the agent's side; oap_script: scripts/oap.sh's
  # refusals, bounds and messages.
  foreach(t demo restart script)
    add_test(NAME oap_${t} COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/oap/oap_${t}.sh)
    # The first run downloads the jars (about a minute here) before the OAP starts.
    set_tests_properties(oap_${t} PROPERTIES LABELS oap TIMEOUT 600 RESOURCE_LOCK oap
                         ENVIRONMENT "${SW_OAP_ENV}")
  endforeach()
  # oap_meters: swagent-reporter's meters as the instance dashboard's metrics (issue 38);
  # oap_cds: the sampling set from the OAP's dynamic configuration (issue 38), served by
  # tests/oap/dcs_server.py (Debian's python3-grpcio); oap_datastores: the virtual database and
  # cache services of Redis and PostgreSQL exit spans (issue 36; servers of tests/db/dblib.sh).
  foreach(t meters cds datastores)
    add_test(NAME oap_${t} COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/oap/oap_${t}.sh)
    set_tests_properties(oap_${t} PROPERTIES LABELS oap TIMEOUT 600 RESOURCE_LOCK oap
                         ENVIRONMENT "${SW_OAP_ENV};DB_DIR=${SW_TESTS_DIR}/db")
  endforeach()
  # The interop chains of tests/interop/ with a foreign SkyWalking agent, reported to the OAP:
  # the Node.js agent's (npm fixture of tests/e2e.cmake) and the Python agent's (pip fixture).
  function(sw_oap_interop name fixture env)
    if(TEST ${fixture}_install)
      add_test(NAME ${name} COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/oap/${name}.sh)
      set_tests_properties(${name} PROPERTIES LABELS oap TIMEOUT 600 RESOURCE_LOCK oap
        FIXTURES_REQUIRED ${fixture}
        ENVIRONMENT "${SW_OAP_ENV};INTEROP_DIR=${SW_TESTS_DIR}/interop;${env}")
    endif()
  endfunction()
  sw_oap_interop(oap_interop_node interop_npm NODE_MODULES=${CMAKE_CURRENT_BINARY_DIR}/interop/node_modules)
  sw_oap_interop(oap_interop_python interop_pip PY_VENV=${CMAKE_CURRENT_BINARY_DIR}/interop/python/venv)
endif()
