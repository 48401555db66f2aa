# Extra build settings of the agent's application side (owned by interpose), included by
# agent/CMakeLists.txt right after swagent_core is defined.
#
# HTTP parsing is agent/http.c's own scanner (libhttp-parser is no longer linked).
target_link_libraries(swagent_core PUBLIC dl)
