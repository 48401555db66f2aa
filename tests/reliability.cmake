# Reliability tests (owner: reliability): collector outages with spooling and replay, reporter
# SIGKILLs, visible losses, TLS and mTLS to collector-stub, a slow or narrow link
# (slow_relay.py), SIGTERM while connecting. Real traced curl and python3.
# The spool on its own (agent/reporter/spool.c + ring.c's directory checks + log.c).
find_package(PkgConfig REQUIRED)
pkg_check_modules(SW_REL_ZSTD REQUIRED IMPORTED_TARGET libzstd)
add_executable(test_spool ${SW_TESTS_DIR}/unit/test_spool.c
                          ${PROJECT_SOURCE_DIR}/agent/reporter/spool.c)
target_include_directories(test_spool PRIVATE ${SW_TESTS_DIR} ${PROJECT_SOURCE_DIR}/agent
                           ${PROJECT_SOURCE_DIR}/agent/reporter)
target_link_libraries(test_spool PRIVATE swcommon PkgConfig::SW_REL_ZSTD)
add_test(NAME reliability_spool_unit COMMAND test_spool)
set_tests_properties(reliability_spool_unit PROPERTIES LABELS unit TIMEOUT 60)

if(TARGET swagent-reporter AND TARGET collector-stub AND TARGET swagent-cli AND TARGET swagent)
  find_program(SW_JQ jq)
  find_program(SW_PYTHON3 python3)
  find_program(SW_CURL curl)
  if(SW_JQ AND SW_PYTHON3 AND SW_CURL)
    foreach(mode outage_start outage_mid blackhole kill spool_cap drops tls mtls slowlink
                 slowlink_bulk sigterm partial partial_replay
                 probe_ok toolarge toolarge_spool toolarge_java toolarge_rotate bad_records
                 exit_reports)
      set(extra "")
      if(mode MATCHES "^(tls|mtls|slowlink|slowlink_bulk|sigterm|partial|partial_replay|probe_ok|toolarge|toolarge_spool|toolarge_java|toolarge_rotate|bad_records|exit_reports)$")
        set(extra $<TARGET_FILE:reporter_producer>)
      endif()
      add_test(NAME reliability_${mode}
               COMMAND sh ${SW_TESTS_DIR}/reliability/reliability_test.sh ${mode}
                       $<TARGET_FILE:swagent-reporter> $<TARGET_FILE:collector-stub>
                       $<TARGET_FILE:swagent-cli> $<TARGET_FILE:swagent> ${extra})
      set_tests_properties(reliability_${mode} PROPERTIES LABELS integration TIMEOUT 120)
    endforeach()
    # Modes run again on the collect stream (swagent.grpc_batch=false): the narrow link (its
    # probe is a stream of no message) and a refusal as too large in the OAP's (grpc-java's)
    # words.
    foreach(mode slowlink_bulk toolarge_java)
      add_test(NAME reliability_${mode}_stream
               COMMAND sh ${SW_TESTS_DIR}/reliability/reliability_test.sh ${mode}
                       $<TARGET_FILE:swagent-reporter> $<TARGET_FILE:collector-stub>
                       $<TARGET_FILE:swagent-cli> $<TARGET_FILE:swagent>
                       $<TARGET_FILE:reporter_producer>)
      set_tests_properties(reliability_${mode}_stream PROPERTIES LABELS integration
                           TIMEOUT 120 ENVIRONMENT SW_AGENT_GRPC_BATCH=false)
    endforeach()
  endif()
endif()
