# Extra build settings of the agent's application side (owned by interpose), included by
# agent/CMakeLists.txt right after swagent_core is defined.
#
# libhttp-parser is linked statically (its .a is PIC; see agent/http.h): no DT_NEEDED is added
# to traced processes and its symbols stay local through swagent.map.
find_library(SW_HTTP_PARSER_A NAMES libhttp_parser.a REQUIRED)
target_link_libraries(swagent_core PUBLIC ${SW_HTTP_PARSER_A} dl)
