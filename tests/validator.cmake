# Validator tests (owner: validator): swagent's traces judged by an independent OAP stand-in,
# tests/validator/oap_validator.js, built from SkyWalking's own generated schema code (npm
# skywalking-backend-js lib/proto, with @grpc/grpc-js and google-protobuf; pinned by
# tests/validator/package-lock.json). The fixture installs the packages with `npm ci` into the
# build tree; without node, npm or the npm registry it fails with a message, and the tests that
# need it then do not run (ctest reports them as failed). Label: integration.
find_program(SW_VAL_BASH bash)
if(TARGET swagent AND TARGET swagent-reporter AND TARGET swagent-cli AND SW_VAL_BASH)
  set(SW_VALIDATOR_NODE_DIR ${CMAKE_CURRENT_BINARY_DIR}/validator)
  add_test(NAME validator_npm_install
           COMMAND sh ${SW_TESTS_DIR}/validator/npm_install.sh ${SW_TESTS_DIR}/validator
                   ${SW_VALIDATOR_NODE_DIR})
  set_tests_properties(validator_npm_install PROPERTIES LABELS integration TIMEOUT 330
                       FIXTURES_SETUP validator_npm)
  # The validator must flag hand-made bad segments (µs times, no span 0, ref on an exit, peer
  # mismatch, ...) sent to it over gRPC with gzip, and pass the good ones.
  add_test(NAME validator_self_test
           COMMAND node ${SW_TESTS_DIR}/validator/oap_validator.js --self-test)
  set_tests_properties(validator_self_test PROPERTIES LABELS integration TIMEOUT 60
                       FIXTURES_REQUIRED validator_npm
                       ENVIRONMENT "NODE_PATH=${SW_VALIDATOR_NODE_DIR}/node_modules")
  # curl -> nginx (2 workers) -> python under swagent, reported to the validator.
  add_test(NAME validator_swagent
           COMMAND ${SW_VAL_BASH} ${SW_TESTS_DIR}/validator/run_validator.sh)
  set_tests_properties(validator_swagent PROPERTIES LABELS integration TIMEOUT 120
                       FIXTURES_REQUIRED validator_npm
                       ENVIRONMENT "SWAGENT_CLI=$<TARGET_FILE:swagent-cli>;SWAGENT_REPORTER=$<TARGET_FILE:swagent-reporter>;VALIDATOR_DIR=${SW_TESTS_DIR}/validator;NODE_MODULES=${SW_VALIDATOR_NODE_DIR}/node_modules")
endif()
