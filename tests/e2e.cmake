# End-to-end tests (owner: e2e): real programs (curl, python3 http.server, nginx, node with
# SkyWalking's Node.js agent, python with SkyWalking's Python agent) under libswagent.so, the
# reporter started on demand, and collector-stub; the stub's JSON is checked field by field with
# jq. Scripts: tests/e2e/, tests/interop/. Label: integration.
find_program(SW_E2E_BASH bash)
find_program(SW_E2E_JQ jq)
find_program(SW_E2E_CURL curl)
find_program(SW_E2E_PYTHON3 python3)
if(TARGET swagent AND TARGET swagent-reporter AND TARGET collector-stub AND TARGET swagent-cli
   AND SW_E2E_BASH AND SW_E2E_JQ AND SW_E2E_CURL AND SW_E2E_PYTHON3)
  set(SW_E2E_ENV
      "SWAGENT_LIB=$<TARGET_FILE:swagent>"
      "SWAGENT_CLI=$<TARGET_FILE:swagent-cli>"
      "SWAGENT_REPORTER=$<TARGET_FILE:swagent-reporter>"
      "COLLECTOR_STUB=$<TARGET_FILE:collector-stub>"
      "E2E_DIR=${SW_TESTS_DIR}/e2e"
      "BUILD_DIR=${PROJECT_BINARY_DIR}"
      "CC=${CMAKE_C_COMPILER}")
  foreach(t basic nginx shed keepalive sw8_malformed bytes sampling untraced config install
            spool_exit untraceable interleave keep keep_db meters quota_nginx cds svc_corrupt logs)
    add_test(NAME e2e_${t} COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/e2e/${t}.sh)
    set_tests_properties(e2e_${t} PROPERTIES LABELS integration TIMEOUT 120
                         ENVIRONMENT "${SW_E2E_ENV}")
  endforeach()
  # The log cap's cost: CPU time of a 100 MB writer traced against bare (label timing: alone).
  # The bound, in percent of bare: 150, and 400 with a sanitized agent (ASan's checks on the
  # capture path are not the cap's cost).
  if(SW_SANITIZE)
    set(SW_LOGS_CAP_BOUND 400)
  else()
    set(SW_LOGS_CAP_BOUND 150)
  endif()
  add_test(NAME e2e_logs_cap COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/e2e/logs_cap.sh)
  set_tests_properties(e2e_logs_cap PROPERTIES LABELS "integration;timing" TIMEOUT 180
                       ENVIRONMENT "${SW_E2E_ENV};LOGS_CAP_BOUND_PCT=${SW_LOGS_CAP_BOUND}")
  # The awkward writers of the preload tests' client (tests/agent.cmake builds it).
  if(TARGET preload_http_client)
    add_test(NAME e2e_bytewise COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/e2e/bytewise.sh)
    set_tests_properties(e2e_bytewise PROPERTIES LABELS integration TIMEOUT 120
      ENVIRONMENT "${SW_E2E_ENV};HTTP_CLIENT=$<TARGET_FILE:preload_http_client>;PRELOAD_DIR=${SW_TESTS_DIR}/preload")
  endif()
endif()

# sw_interop(NAME FIXTURE ENV INSTALL_COMMAND...): an interop test with a foreign SkyWalking
# agent: the fixture test FIXTURE_install runs INSTALL_COMMAND (installs the agent, pinned, into
# the build tree), then tests/interop/NAME.sh runs with the e2e environment, INTEROP_DIR and ENV
# (one VAR=value naming the install). Without the fixture's tools or registry the fixture fails,
# and so does (does not run) the test.
function(sw_interop name fixture env)
  add_test(NAME ${fixture}_install COMMAND ${ARGN})
  set_tests_properties(${fixture}_install PROPERTIES LABELS integration TIMEOUT 330
                       FIXTURES_SETUP ${fixture})
  add_test(NAME ${name} COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/interop/${name}.sh)
  set_tests_properties(${name} PROPERTIES LABELS integration TIMEOUT 120
                       FIXTURES_REQUIRED ${fixture}
                       ENVIRONMENT "${SW_E2E_ENV};INTEROP_DIR=${SW_TESTS_DIR}/interop;${env}")
endfunction()

if(TARGET swagent AND TARGET swagent-reporter AND TARGET collector-stub
   AND SW_E2E_BASH AND SW_E2E_JQ AND SW_E2E_CURL AND SW_E2E_PYTHON3)
  set(SW_INTEROP_NODE_DIR ${CMAKE_CURRENT_BINARY_DIR}/interop)
  # SkyWalking's Node.js agent (skywalking-backend-js, pinned by tests/interop/package-lock.json),
  # installed with `npm ci`.
  sw_interop(interop_node interop_npm NODE_MODULES=${SW_INTEROP_NODE_DIR}/node_modules
             sh ${SW_TESTS_DIR}/interop/npm_install.sh ${SW_TESTS_DIR}/interop
             ${SW_INTEROP_NODE_DIR})
  # SkyWalking's Python agent (apache-skywalking from PyPI, pinned with hashes by
  # tests/interop/requirements-python.txt), pip-installed (wheels only) into a venv made by
  # SW_INTEROP_PYTHON: Debian's python3 (scripts/deps.sh installs it with python3-venv), not
  # whatever python3 comes first on PATH.
  set(SW_INTEROP_PYTHON /usr/bin/python3 CACHE FILEPATH
      "Python whose venv holds SkyWalking's Python agent for interop_python")
  sw_interop(interop_python interop_pip PY_VENV=${SW_INTEROP_NODE_DIR}/python/venv
             sh ${SW_TESTS_DIR}/interop/pip_install.sh ${SW_TESTS_DIR}/interop
             ${SW_INTEROP_NODE_DIR}/python ${SW_INTEROP_PYTHON})
endif()
