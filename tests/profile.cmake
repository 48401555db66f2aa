# Trace profiling tests (owner: profile, docs/profiling.md): tests/profile/slow_server.c (a C
# HTTP server with a named slow function and a battery of waits) under libswagent.so, the
# reporter, and collector-stub handing out --profile-task tasks; the snapshots are checked with
# jq and the `collector-stub profile` view. Label: integration.
find_program(SW_PROF_BASH bash)
find_program(SW_PROF_JQ jq)
find_program(SW_PROF_CURL curl)
if(TARGET swagent AND TARGET swagent-reporter AND TARGET collector-stub AND SW_PROF_BASH
   AND SW_PROF_JQ AND SW_PROF_CURL)
  add_executable(profile_slow_server ${SW_TESTS_DIR}/profile/slow_server.c)
  # Frame pointers (the sampler walks them) and debug info (file:line in the signatures).
  target_compile_options(profile_slow_server PRIVATE -O2 -g -fno-omit-frame-pointer)
  target_link_libraries(profile_slow_server PRIVATE pthread)
  # The long stress's load (tests/profile/stress_long.sh; not a ctest test).
  add_executable(profile_stress_client ${SW_TESTS_DIR}/profile/stress_client.c)
  target_link_libraries(profile_stress_client PRIVATE pthread)
  foreach(t slow unsampled wait sleep exec fork leak finish bad nginx python stress)
    add_test(NAME profile_${t} COMMAND ${SW_PROF_BASH} ${SW_TESTS_DIR}/profile/profile.sh ${t})
    set_tests_properties(profile_${t} PROPERTIES LABELS integration TIMEOUT 120
      ENVIRONMENT "SWAGENT_LIB=$<TARGET_FILE:swagent>;SWAGENT_REPORTER=$<TARGET_FILE:swagent-reporter>;COLLECTOR_STUB=$<TARGET_FILE:collector-stub>;E2E_DIR=${SW_TESTS_DIR}/e2e;SLOW_SERVER=$<TARGET_FILE:profile_slow_server>")
  endforeach()
endif()

# Against a real OAP (tests/oap.cmake's tools and environment; label oap, stage 1 only).
if(TARGET profile_slow_server AND SW_OAP_ENV)
  add_test(NAME oap_profile COMMAND ${SW_PROF_BASH} ${SW_TESTS_DIR}/oap/oap_profile.sh)
  set_tests_properties(oap_profile PROPERTIES LABELS oap TIMEOUT 600 RESOURCE_LOCK oap
    ENVIRONMENT "${SW_OAP_ENV};SLOW_SERVER=$<TARGET_FILE:profile_slow_server>")
endif()
