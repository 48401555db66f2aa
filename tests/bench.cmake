# bench/ tests: the statistics of bench/stats.py (bench/report.py, bench/pool.py) and the
# verdicts bench/pool.py gives over several runs, on made-up runs whose verdicts are known; the
# Node.js report (bench/node_report.py) likewise.
find_program(SW_BENCH_PYTHON3 python3)
if(SW_BENCH_PYTHON3)
  add_test(NAME bench_pool COMMAND ${SW_BENCH_PYTHON3} -W error ${SW_TESTS_DIR}/bench/test_pool.py)
  set_tests_properties(bench_pool PROPERTIES LABELS unit TIMEOUT 60)
  # bench/node_report.py (run.sh --node) and cg_diff.py's CG_OBJECT on made-up data; needs
  # callgrind_annotate (valgrind, scripts/deps.sh): without it the test fails, it does not skip.
  add_test(NAME bench_node_report
           COMMAND ${SW_BENCH_PYTHON3} -W error ${SW_TESTS_DIR}/bench/test_node_report.py)
  set_tests_properties(bench_node_report PROPERTIES LABELS unit TIMEOUT 60)
endif()
