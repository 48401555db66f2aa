# conf-prop tests: config, log, propagation, sampler, id (unit) and the config / sw8 fuzzers.
#
# Each unit test compiles the module sources it needs directly (with SW_TESTING), so it does
# not depend on the agent libraries being complete.
find_package(Threads REQUIRED)

set(SW_CP_AGENT ${PROJECT_SOURCE_DIR}/agent)

function(sw_cp_target name)
  target_include_directories(${name} PRIVATE ${SW_CP_AGENT} ${SW_TESTS_DIR})
  target_compile_definitions(${name} PRIVATE SW_TESTING)
  target_link_libraries(${name} PRIVATE Threads::Threads)
endfunction()

function(sw_cp_unit name)
  add_executable(${name} ${SW_TESTS_DIR}/unit/${name}.c ${ARGN})
  sw_cp_target(${name})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120)
endfunction()

sw_cp_unit(test_config ${SW_CP_AGENT}/config.c ${SW_CP_AGENT}/log.c)
sw_cp_unit(test_log ${SW_CP_AGENT}/log.c)
sw_cp_unit(test_propagation ${SW_CP_AGENT}/propagation.c)
sw_cp_unit(test_sampler ${SW_CP_AGENT}/sampler.c)
sw_cp_unit(test_svcblock ${SW_CP_AGENT}/svcblock.c ${SW_CP_AGENT}/sampler.c ${SW_CP_AGENT}/config.c
           ${SW_CP_AGENT}/log.c)
sw_cp_unit(test_id ${SW_CP_AGENT}/id.c)
sw_cp_unit(test_clock ${SW_CP_AGENT}/clock.c)

# Fuzz targets: LLVMFuzzerTestOneInput in tests/fuzz/fuzz_<name>.c. Always built as a plain
# replay executable over the seed corpus (tests/fuzz/corpus/<name>/); built as libFuzzer
# targets with a bounded run when SW_BUILD_FUZZERS=ON and the compiler is clang.
set(SW_CP_FUZZ_config ${SW_CP_AGENT}/config.c ${SW_CP_AGENT}/log.c)
set(SW_CP_FUZZ_sw8 ${SW_CP_AGENT}/propagation.c)
foreach(fz config sw8)
  add_executable(replay_${fz} ${SW_TESTS_DIR}/fuzz/fuzz_${fz}.c
                 ${SW_TESTS_DIR}/fuzz/replay_conf_prop.c ${SW_CP_FUZZ_${fz}})
  sw_cp_target(replay_${fz})
  add_test(NAME replay_${fz} COMMAND replay_${fz} ${SW_TESTS_DIR}/fuzz/corpus/${fz})
  set_tests_properties(replay_${fz} PROPERTIES LABELS unit TIMEOUT 120)
  if(SW_BUILD_FUZZERS AND CMAKE_C_COMPILER_ID MATCHES "Clang")
    add_executable(fuzz_${fz} ${SW_TESTS_DIR}/fuzz/fuzz_${fz}.c ${SW_CP_FUZZ_${fz}})
    sw_cp_target(fuzz_${fz})
    target_compile_options(fuzz_${fz} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_${fz} PRIVATE -fsanitize=fuzzer,address,undefined)
    # New inputs go to a directory in the build tree, never into the source corpus.
    set(work ${CMAKE_CURRENT_BINARY_DIR}/fuzz_work_${fz})
    file(MAKE_DIRECTORY ${work})
    add_test(NAME fuzz_${fz}
             COMMAND fuzz_${fz} -runs=20000 -max_total_time=20 -max_len=8192
                     ${work} ${SW_TESTS_DIR}/fuzz/corpus/${fz})
    set_tests_properties(fuzz_${fz} PROPERTIES LABELS fuzz TIMEOUT 120)
  endif()
endforeach()
