# Extra build settings of the agent's application side (owned by interpose), included by
# agent/CMakeLists.txt right after swagent_core is defined.
#
# HTTP parsing is agent/http.c's own scanner (libhttp-parser is no longer linked).
target_link_libraries(swagent_core PUBLIC dl)

# Trace profiling walks frame pointers (docs/profiling.md): the sampler's own frames and the
# wait wrappers keep them, so a sample taken where a wait wrapper releases the held signal
# reaches the application's frames.
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/profile.c
                            ${CMAKE_CURRENT_SOURCE_DIR}/interpose.c
                            PROPERTIES COMPILE_OPTIONS "-fno-omit-frame-pointer")
