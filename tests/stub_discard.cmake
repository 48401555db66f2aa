# tests/stub_discard.cmake - collector-stub --discard (the bench's cheap collector): segments are
# parsed and counted, not written; malformed messages are still refused and counted. Uses
# stub_client from tests/stub_e2e.cmake. The reporter side of --discard and --no-sync is tested
# in tests/reporter.cmake (reporter_discard, reporter_nosync).
if(TARGET collector-stub)
  add_test(NAME stub_discard
           COMMAND sh ${SW_TESTS_DIR}/integration/stub_discard.sh $<TARGET_FILE:collector-stub>
                   $<TARGET_FILE:stub_client> ${CMAKE_CURRENT_BINARY_DIR}/stub_discard)
  set_tests_properties(stub_discard PROPERTIES LABELS integration TIMEOUT 90)
endif()
