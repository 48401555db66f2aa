# tests/harness.cmake - a test of CI's own checks (scripts/ci_checks.sh, which scripts/test.sh
# uses): against a scratch CMake/ctest project, a test that is no longer registered, a skip
# that is not on the allowlist, a skip disguised as a pass, an empty selection, and an ASan
# report from a background (traced) server each turn the checks red; the clean case is green.
# Label harness (not unit: stage 3 builds everything with TSan, which cannot be mixed with the
# server's ASan, so it is not built there).
if(NOT SW_SANITIZE MATCHES "thread")
  find_program(SW_HARNESS_JQ jq)
  find_program(SW_HARNESS_PYTHON3 python3)
  add_executable(harness_overflow_server ${SW_TESTS_DIR}/harness/overflow_server.c)
  if(NOT SW_SANITIZE MATCHES "address")
    target_compile_options(harness_overflow_server PRIVATE -fsanitize=address -fno-omit-frame-pointer)
    target_link_options(harness_overflow_server PRIVATE -fsanitize=address)
  endif()
  if(SW_HARNESS_JQ AND SW_HARNESS_PYTHON3 AND TARGET swagent)
    add_test(NAME harness_ci_checks
             COMMAND bash ${SW_TESTS_DIR}/harness/harness_test.sh ${PROJECT_SOURCE_DIR}
                     ${CMAKE_COMMAND} ${CMAKE_CTEST_COMMAND}
                     $<TARGET_FILE:harness_overflow_server> $<TARGET_FILE:swagent>)
    set_tests_properties(harness_ci_checks PROPERTIES LABELS harness TIMEOUT 120)
  endif()
endif()
