# cmake/modules/tools.cmake - the trace tools (issue 16):
#   libheapkit-record.so  records a program's allocations (shim/record_malloc.c)
#   libheapkit-stats.so   a size histogram in front of libheapkit-malloc.so
#                         (shim/stats_malloc.c, for `heapkit stats`)
#   heapkit record|replay|report|map|stats, added to the `heapkit` tool
#   (tools/cmd_*.c; the command table in tools/heapkit.c names them)
# and their tests (tests/tools/). The heap map library itself (src/map.c)
# is part of libheapkit.
#
# The preloads are left out of sanitizer builds (an instrumented malloc
# interposer cannot run under ASan's allocator); the tool is built there too.

set(HK_TOOLS_DIR ${PROJECT_SOURCE_DIR}/tools)
target_sources(heapkit_tool PRIVATE
  ${HK_TOOLS_DIR}/trace.c ${HK_TOOLS_DIR}/analysis.c ${HK_TOOLS_DIR}/symbols.c ${HK_TOOLS_DIR}/replay.c
  ${HK_TOOLS_DIR}/tool_util.c ${HK_TOOLS_DIR}/cmd_record.c ${HK_TOOLS_DIR}/cmd_replay.c
  ${HK_TOOLS_DIR}/cmd_report.c ${HK_TOOLS_DIR}/report_html.c ${HK_TOOLS_DIR}/cmd_map.c
  ${HK_TOOLS_DIR}/cmd_stats.c ${PROJECT_SOURCE_DIR}/bench/harness.c)
target_include_directories(heapkit_tool PRIVATE ${HK_TOOLS_DIR} ${PROJECT_SOURCE_DIR}/bench)
target_link_libraries(heapkit_tool PRIVATE heapkit Threads::Threads ${CMAKE_DL_LIBS} m)
target_compile_definitions(heapkit_tool PRIVATE _GNU_SOURCE)

if(NOT HEAPKIT_SANITIZE AND NOT HEAPKIT_TSAN)
  foreach(pl record stats)
    add_library(heapkit_${pl}_preload SHARED ${PROJECT_SOURCE_DIR}/shim/${pl}_malloc.c)
    set_target_properties(heapkit_${pl}_preload PROPERTIES OUTPUT_NAME heapkit-${pl}
      LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
    target_include_directories(heapkit_${pl}_preload PRIVATE ${PROJECT_SOURCE_DIR}/shim ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(heapkit_${pl}_preload PRIVATE heapkit heapkit_warnings ${CMAKE_DL_LIBS} Threads::Threads)
    target_compile_definitions(heapkit_${pl}_preload PRIVATE _GNU_SOURCE)
    target_link_options(heapkit_${pl}_preload PRIVATE -Wl,--exclude-libs,ALL)
    add_dependencies(heapkit_tool heapkit_${pl}_preload)
    install(TARGETS heapkit_${pl}_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endforeach()
endif()

if(BUILD_TESTING AND HEAPKIT_BUILD_TESTS)
  include(${PROJECT_SOURCE_DIR}/tests/tools/tests.cmake)
endif()
