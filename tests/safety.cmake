# Host-safety, fork/exec, uid and thread tests of the agent (owned by safety).
#   tests/preload/safety_test.sh <case>: real programs (nginx, python3, curl) under the agent,
#     with the real reporter and collector-stub (label integration), or alone (label preload).
find_package(Threads REQUIRED)

if(TARGET swagent)
  add_executable(safety_helper ${SW_TESTS_DIR}/preload/safety_helper.c)
  target_link_libraries(safety_helper PRIVATE dl Threads::Threads)
  # Host safety with real programs, no reporter: AT_SECURE (setuid copy run as nobody), fds
  # closed or replaced under the agent, close-on-exec, symlinked runtime dir and log file,
  # file modes, out of memory at init (ulimit -v), no log from processes that trace nothing,
  # activation at the first internet socket or accept (nothing mapped before), a reporter that
  # cannot be started (logged).
  set(SW_SAFETY_PRELOAD setuid closefrom close_range dup2_log cloexec symlink_rundir
      symlink_log modes oom quiet_start lazy_start reporter_missing)
  foreach(c ${SW_SAFETY_PRELOAD})
    add_test(NAME safety_${c} COMMAND bash ${SW_TESTS_DIR}/preload/safety_test.sh ${c})
    set_tests_properties(safety_${c} PROPERTIES LABELS preload TIMEOUT 120
      ENVIRONMENT "SWAGENT_LIB=$<TARGET_FILE:swagent>;SAFETY_HELPER=$<TARGET_FILE:safety_helper>;PRELOAD_DIR=${SW_TESTS_DIR}/preload")
  endforeach()
endif()

if(TARGET swagent AND TARGET swagent-reporter)
  # The reporter's executable (or a renamed copy, or a symlink) never runs the agent.
  add_test(NAME safety_selfnote COMMAND bash ${SW_TESTS_DIR}/preload/safety_test.sh selfnote)
  set_tests_properties(safety_selfnote PROPERTIES LABELS preload TIMEOUT 60
    ENVIRONMENT "SWAGENT_LIB=$<TARGET_FILE:swagent>;REPORTER=$<TARGET_FILE:swagent-reporter>;SAFETY_HELPER=$<TARGET_FILE:safety_helper>;PRELOAD_DIR=${SW_TESTS_DIR}/preload")
endif()

if(TARGET swagent AND TARGET swagent-reporter AND TARGET collector-stub)
  set(SW_SAFETY_INTEGRATION nginx_nobody cgi forking threading)
  foreach(c ${SW_SAFETY_INTEGRATION})
    add_test(NAME safety_${c} COMMAND bash ${SW_TESTS_DIR}/preload/safety_test.sh ${c})
    set_tests_properties(safety_${c} PROPERTIES LABELS integration TIMEOUT 180
      ENVIRONMENT "SWAGENT_LIB=$<TARGET_FILE:swagent>;REPORTER=$<TARGET_FILE:swagent-reporter>;STUB=$<TARGET_FILE:collector-stub>;PRELOAD_DIR=${SW_TESTS_DIR}/preload")
  endforeach()
endif()

# Concurrency stress through the real interposition layer. The program is LINKED with
# interpose.c and the agent modules instead of preloading libswagent.so: its own socket calls
# are then the agent's wrappers (the same code path as under LD_PRELOAD), and a ThreadSanitizer
# build (-DSW_SANITIZE=thread, which instruments every target) checks the agent and the test
# together, with no LD_PRELOAD ordering question (the TSan runtime must be initialised before
# any instrumented code runs; a preloaded instrumented library would come before the program's
# own libtsan dependency in the search order). Linking gives the same symbol binding as the
# preload: the program's calls reach interpose.c's wrappers, whose dlsym(RTLD_NEXT) finds
# libtsan's interceptors and then libc.
# safety_stress: 8 threads x 10,000 keep-alive requests (client and thread-pool server in one
# process), the ring drained concurrently and every record checked.
# safety_ring_overflow: a 64 KiB ring nobody drains: the burst completes, new traces are shed
# (counted) once it is full, and no started segment is dropped.
# safety_forkstorm: 100 forks while 8 client and 9 server threads are inside the agent; every
# child makes a traced request of its own (sw8 inserted, own ring) and none hangs.
# Run under TSan: cmake -DSW_SANITIZE=thread, build safety_stress, ctest -R 'safety_(stress|
# ring_overflow|forkstorm)'. (8 x 10,000 took 27 s under TSan on the 2-core CI machine.)
if(TARGET swagent_core)
  add_executable(safety_stress ${SW_TESTS_DIR}/preload/stress.c ${PROJECT_SOURCE_DIR}/agent/interpose.c)
  target_compile_options(safety_stress PRIVATE -ftls-model=initial-exec)
  target_link_libraries(safety_stress PRIVATE swagent_core swcommon dl Threads::Threads)
  add_test(NAME safety_stress COMMAND bash ${SW_TESTS_DIR}/preload/safety_test.sh stress)
  add_test(NAME safety_ring_overflow COMMAND bash ${SW_TESTS_DIR}/preload/safety_test.sh overflow)
  add_test(NAME safety_forkstorm COMMAND bash ${SW_TESTS_DIR}/preload/safety_test.sh forkstorm)
  set_tests_properties(safety_stress safety_ring_overflow safety_forkstorm PROPERTIES LABELS preload TIMEOUT 600
    ENVIRONMENT "STRESS=$<TARGET_FILE:safety_stress>")
endif()
