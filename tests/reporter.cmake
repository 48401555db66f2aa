# Reporter tests (owner: reporter): swagent-reporter against collector-stub with rings written
# by reporter_producer, the on-demand spawn from an application process, and the launcher.
if(TARGET swagent-reporter AND TARGET collector-stub AND TARGET swagent-cli)
  add_executable(reporter_producer ${SW_TESTS_DIR}/integration/reporter_producer.c)
  target_include_directories(reporter_producer PRIVATE ${SW_TESTS_DIR})
  target_link_libraries(reporter_producer PRIVATE swcommon)

  # A harmless shared object that stands in for libswagent.so in the `swagent run` test.
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/reporter_empty_preload.c "int sw_reporter_test_empty;\n")
  add_library(reporter_empty_preload SHARED ${CMAKE_CURRENT_BINARY_DIR}/reporter_empty_preload.c)
  # The yield modes' 6th argument instead: a shim that counts the reporter's sched_yield() calls
  # (it gives the CPU back while it encodes and compresses a batch).
  add_library(reporter_yield_count SHARED ${SW_TESTS_DIR}/integration/yield_count.c)

  find_program(SW_JQ jq)
  find_program(SW_PYTHON3 python3)
  if(SW_JQ AND SW_PYTHON3)
    foreach(mode gzip plain auth reconnect multi collectors idle idle_race rmdir second run batch nosync stream
                 discard trickle bigbatch status scan yield yield_stream)
      set(lib $<TARGET_FILE:reporter_empty_preload>)
      if(mode MATCHES "^yield")
        set(lib $<TARGET_FILE:reporter_yield_count>)
      endif()
      add_test(NAME reporter_${mode}
               COMMAND sh ${SW_TESTS_DIR}/integration/reporter_test.sh ${mode}
                       $<TARGET_FILE:swagent-reporter> $<TARGET_FILE:collector-stub>
                       $<TARGET_FILE:reporter_producer> $<TARGET_FILE:swagent-cli> ${lib})
      set_tests_properties(reporter_${mode} PROPERTIES LABELS integration TIMEOUT 90)
    endforeach()
    find_program(SW_CURL curl)
    if(TARGET swagent AND SW_CURL)
      add_test(NAME reporter_e2e
               COMMAND sh ${SW_TESTS_DIR}/integration/reporter_test.sh e2e
                       $<TARGET_FILE:swagent-reporter> $<TARGET_FILE:collector-stub>
                       $<TARGET_FILE:reporter_producer> $<TARGET_FILE:swagent-cli>
                       $<TARGET_FILE:reporter_empty_preload> $<TARGET_FILE:swagent>)
      set_tests_properties(reporter_e2e PROPERTIES LABELS integration TIMEOUT 90)
    endif()
  endif()

  # The reliability tests run batched (collectInSync, the default); these run two of them on the
  # collect stream (swagent.grpc_batch=false), so both delivery paths keep the no-loss rules.
  find_program(SW_CURL_REL curl)
  if(TARGET swagent AND SW_JQ AND SW_PYTHON3 AND SW_CURL_REL)
    foreach(mode outage_mid kill)
      add_test(NAME reliability_${mode}_stream
               COMMAND sh ${SW_TESTS_DIR}/reliability/reliability_test.sh ${mode}
                       $<TARGET_FILE:swagent-reporter> $<TARGET_FILE:collector-stub>
                       $<TARGET_FILE:swagent-cli> $<TARGET_FILE:swagent>)
      set_tests_properties(reliability_${mode}_stream PROPERTIES LABELS integration TIMEOUT 120
                           ENVIRONMENT SW_AGENT_GRPC_BATCH=false)
    endforeach()
  endif()

  add_executable(reporter_spawn ${SW_TESTS_DIR}/integration/reporter_spawn.c
                                ${PROJECT_SOURCE_DIR}/agent/spawn.c)
  target_include_directories(reporter_spawn PRIVATE ${SW_TESTS_DIR} ${PROJECT_SOURCE_DIR}/agent)
  target_link_libraries(reporter_spawn PRIVATE swcommon)
  add_test(NAME reporter_spawn
           COMMAND reporter_spawn $<TARGET_FILE:swagent-reporter>
                   ${CMAKE_CURRENT_BINARY_DIR}/reporter_spawn.run)
  set_tests_properties(reporter_spawn PROPERTIES LABELS integration TIMEOUT 60)

  # `swagent --version` exits 0 and prints exactly the project's version (a regular expression
  # on the output alone passed whatever the exit status).
  add_test(NAME reporter_cli_version
           COMMAND sh -c "out=$('$<TARGET_FILE:swagent-cli>' --version) || exit 1; echo \"$out\"; \
test \"$out\" = 'swagent ${PROJECT_VERSION}'")
  set_tests_properties(reporter_cli_version PROPERTIES LABELS unit)
endif()
