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
            spool_exit untraceable interleave)
    add_test(NAME e2e_${t} COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/e2e/${t}.sh)
    set_tests_properties(e2e_${t} PROPERTIES LABELS integration TIMEOUT 120
                         ENVIRONMENT "${SW_E2E_ENV}")
  endforeach()
  # The awkward writers of the preload tests' client (tests/agent.cmake builds it).
  if(TARGET preload_http_client)
    add_test(NAME e2e_bytewise COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/e2e/bytewise.sh)
    set_tests_properties(e2e_bytewise PROPERTIES LABELS integration TIMEOUT 120
      ENVIRONMENT "${SW_E2E_ENV};HTTP_CLIENT=$<TARGET_FILE:preload_http_client>;PRELOAD_DIR=${SW_TESTS_DIR}/preload")
  endif()
endif()

# Interop with SkyWalking's Node.js agent (skywalking-backend-js, pinned by
# tests/interop/package-lock.json). The fixture installs it with `npm ci` into the build tree;
# without node/npm or the npm registry it fails, and so does (does not run) the test.
if(TARGET swagent AND TARGET swagent-reporter AND TARGET collector-stub
   AND SW_E2E_BASH AND SW_E2E_JQ AND SW_E2E_CURL AND SW_E2E_PYTHON3)
  set(SW_INTEROP_NODE_DIR ${CMAKE_CURRENT_BINARY_DIR}/interop)
  add_test(NAME interop_npm_install
           COMMAND sh ${SW_TESTS_DIR}/interop/npm_install.sh ${SW_TESTS_DIR}/interop
                   ${SW_INTEROP_NODE_DIR})
  set_tests_properties(interop_npm_install PROPERTIES LABELS integration TIMEOUT 330
                       FIXTURES_SETUP interop_npm)
  add_test(NAME interop_node COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/interop/interop_node.sh)
  set_tests_properties(interop_node PROPERTIES LABELS integration TIMEOUT 120
                       FIXTURES_REQUIRED interop_npm
                       ENVIRONMENT "${SW_E2E_ENV};INTEROP_DIR=${SW_TESTS_DIR}/interop;NODE_MODULES=${SW_INTEROP_NODE_DIR}/node_modules")

  # Interop with SkyWalking's Python agent (apache-skywalking from PyPI, pinned with hashes by
  # tests/interop/requirements-python.txt). The fixture makes a venv in the build tree with
  # SW_INTEROP_PYTHON (Debian's python3: scripts/deps.sh installs it with python3-venv; not
  # whatever python3 comes first on PATH) and pip-installs wheels into it; without the venv
  # module or PyPI it fails, and so does (does not run) the test.
  set(SW_INTEROP_PYTHON /usr/bin/python3 CACHE FILEPATH
      "Python whose venv holds SkyWalking's Python agent for interop_python")
  add_test(NAME interop_pip_install
           COMMAND sh ${SW_TESTS_DIR}/interop/pip_install.sh ${SW_TESTS_DIR}/interop
                   ${SW_INTEROP_NODE_DIR}/python ${SW_INTEROP_PYTHON})
  set_tests_properties(interop_pip_install PROPERTIES LABELS integration TIMEOUT 330
                       FIXTURES_SETUP interop_pip)
  add_test(NAME interop_python COMMAND ${SW_E2E_BASH} ${SW_TESTS_DIR}/interop/interop_python.sh)
  set_tests_properties(interop_python PROPERTIES LABELS integration TIMEOUT 120
                       FIXTURES_REQUIRED interop_pip
                       ENVIRONMENT "${SW_E2E_ENV};INTEROP_DIR=${SW_TESTS_DIR}/interop;PY_VENV=${SW_INTEROP_NODE_DIR}/python/venv")
endif()
