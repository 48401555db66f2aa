# Host-safety, fork/exec, uid and thread tests of the agent (owned by safety).
#   tests/preload/safety_test.sh <case>: real programs (nginx, python3, curl) under the agent,
#     with the real reporter and collector-stub (label integration), or alone (label preload).
find_package(Threads REQUIRED)

if(TARGET swagent AND TARGET swagent-reporter AND TARGET collector-stub)
  set(SW_SAFETY_INTEGRATION nginx_nobody cgi forking)
  foreach(c ${SW_SAFETY_INTEGRATION})
    add_test(NAME safety_${c} COMMAND bash ${SW_TESTS_DIR}/preload/safety_test.sh ${c})
    set_tests_properties(safety_${c} PROPERTIES LABELS integration TIMEOUT 180
      ENVIRONMENT "SWAGENT_LIB=$<TARGET_FILE:swagent>;REPORTER=$<TARGET_FILE:swagent-reporter>;STUB=$<TARGET_FILE:collector-stub>;PRELOAD_DIR=${SW_TESTS_DIR}/preload")
  endforeach()
endif()
