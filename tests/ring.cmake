# tests/ring.cmake - tests of the ring (agent/ring.c), drain and encode (agent/reporter/).
# The sources are compiled into each test directly (with SW_TESTING), so these tests do not
# depend on the other modules of swcommon or on the reporter executable.
find_package(Threads REQUIRED)
set(SW_RING_AGENT_DIR ${SW_TESTS_DIR}/../agent)
get_filename_component(SW_RING_AGENT_DIR ${SW_RING_AGENT_DIR} ABSOLUTE)

add_executable(test_ring ${SW_TESTS_DIR}/unit/test_ring.c ${SW_RING_AGENT_DIR}/ring.c)
target_include_directories(test_ring PRIVATE ${SW_RING_AGENT_DIR} ${SW_TESTS_DIR})
target_compile_definitions(test_ring PRIVATE SW_TESTING)
target_link_libraries(test_ring PRIVATE Threads::Threads)
add_test(NAME ring_unit COMMAND test_ring)
set_tests_properties(ring_unit PROPERTIES LABELS unit TIMEOUT 300)
# The two tests that need the machine's help, each its own entry so a skip (exit 77) is seen:
# no page fault in a new ring's first turn (a perf_event_open counter; label timing: run alone),
# and a ring on a full tmpfs (a mount namespace of its own).
add_test(NAME ring_first_turn COMMAND test_ring first_turn)
set_tests_properties(ring_first_turn PROPERTIES LABELS "unit;timing" TIMEOUT 120)
add_test(NAME ring_tmpfs_full COMMAND test_ring tmpfs_full)
set_tests_properties(ring_tmpfs_full PROPERTIES LABELS unit TIMEOUT 120)

# Encode: record -> protobuf-c SegmentObject (needs the generated proto library).
add_executable(test_encode ${SW_TESTS_DIR}/unit/test_encode.c
               ${SW_RING_AGENT_DIR}/reporter/encode.c)
target_include_directories(test_encode PRIVATE ${SW_RING_AGENT_DIR}
                           ${SW_RING_AGENT_DIR}/reporter ${SW_TESTS_DIR} ${SW_TESTS_DIR}/unit)
target_compile_definitions(test_encode PRIVATE SW_TESTING)
target_link_libraries(test_encode PRIVATE swproto)
add_test(NAME encode_unit COMMAND test_encode)
set_tests_properties(encode_unit PROPERTIES LABELS unit TIMEOUT 120)

# Drain: the reporter's ring discovery, hand-out/commit, dead producers.
add_executable(test_drain ${SW_TESTS_DIR}/unit/test_drain.c ${SW_RING_AGENT_DIR}/ring.c
               ${SW_RING_AGENT_DIR}/reporter/drain.c ${SW_RING_AGENT_DIR}/reporter/encode.c)
target_include_directories(test_drain PRIVATE ${SW_RING_AGENT_DIR}
                           ${SW_RING_AGENT_DIR}/reporter ${SW_TESTS_DIR} ${SW_TESTS_DIR}/unit)
target_compile_definitions(test_drain PRIVATE SW_TESTING)
target_link_libraries(test_drain PRIVATE swproto)
add_test(NAME drain_unit COMMAND test_drain)
set_tests_properties(drain_unit PROPERTIES LABELS unit TIMEOUT 120)

# The reporter's process table: lookups stay a few probes with a full table.
add_executable(test_procs ${SW_TESTS_DIR}/unit/test_procs.c ${SW_RING_AGENT_DIR}/reporter/procs.c)
target_include_directories(test_procs PRIVATE ${SW_RING_AGENT_DIR}
                           ${SW_RING_AGENT_DIR}/reporter ${SW_TESTS_DIR})
add_test(NAME procs_unit COMMAND test_procs)
set_tests_properties(procs_unit PROPERTIES LABELS unit TIMEOUT 60)

# The reporter's meters: /proc parsing on a fake tree, the encoded MeterDataCollection.
add_executable(test_meter ${SW_TESTS_DIR}/unit/test_meter.c ${SW_RING_AGENT_DIR}/reporter/meter.c)
target_include_directories(test_meter PRIVATE ${SW_RING_AGENT_DIR}
                           ${SW_RING_AGENT_DIR}/reporter ${SW_TESTS_DIR})
target_link_libraries(test_meter PRIVATE swcommon swproto m)
add_test(NAME meter_unit COMMAND test_meter)
set_tests_properties(meter_unit PROPERTIES LABELS unit TIMEOUT 60)

# Fuzzer of segment records and ring images: a plain replay over the seed corpus always, and a
# bounded libFuzzer run when built with clang and -DSW_BUILD_FUZZERS=ON.
set(SW_RING_FUZZ_SRCS ${SW_TESTS_DIR}/fuzz/fuzz_record.c ${SW_RING_AGENT_DIR}/ring.c
    ${SW_RING_AGENT_DIR}/reporter/encode.c)
add_executable(replay_record ${SW_RING_FUZZ_SRCS} ${SW_TESTS_DIR}/fuzz/replay_conf_prop.c)
target_include_directories(replay_record PRIVATE ${SW_RING_AGENT_DIR} ${SW_RING_AGENT_DIR}/reporter)
target_compile_definitions(replay_record PRIVATE SW_TESTING)
target_link_libraries(replay_record PRIVATE swproto)
add_test(NAME replay_record COMMAND replay_record ${SW_TESTS_DIR}/fuzz/corpus/record)
set_tests_properties(replay_record PROPERTIES LABELS unit TIMEOUT 60)
if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_record ${SW_RING_FUZZ_SRCS})
  target_include_directories(fuzz_record PRIVATE ${SW_RING_AGENT_DIR} ${SW_RING_AGENT_DIR}/reporter)
  target_compile_definitions(fuzz_record PRIVATE SW_TESTING)
  target_compile_options(fuzz_record PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_record PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_record PRIVATE swproto)
  set(SW_RING_FUZZ_WORK ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work_record)
  file(MAKE_DIRECTORY ${SW_RING_FUZZ_WORK})
  add_test(NAME fuzz_record
           COMMAND fuzz_record -runs=5000 -max_total_time=20 -max_len=16384
                   ${SW_RING_FUZZ_WORK} ${SW_TESTS_DIR}/fuzz/corpus/record)
  set_tests_properties(fuzz_record PROPERTIES LABELS "fuzz;slow" TIMEOUT 180)
endif()
