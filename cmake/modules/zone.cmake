# The zone's extras: libheapkit.so becomes the LD_PRELOAD malloc replacement
# (shim/zone_malloc.c on the zone), and the tests that run real programs
# under it. The static library never replaces malloc.
#
# Not in the sanitizer build: an ASan-instrumented malloc replacement cannot
# run under ASan's own allocator, so the shim and its tests are left out
# there (the tests carry the no-sanitize label as well).
if(NOT HEAPKIT_SANITIZE)
  target_sources(heapkit_shared PRIVATE ${PROJECT_SOURCE_DIR}/shim/zone_malloc.c)
  target_include_directories(heapkit_shared PRIVATE ${PROJECT_SOURCE_DIR}/shim)

  if(BUILD_TESTING AND HEAPKIT_BUILD_TESTS)
    # A C program that exercises every entry point, errno, threads and fork.
    add_executable(zone_preload_prog ${PROJECT_SOURCE_DIR}/tests/zone_preload_prog.c)
    target_link_libraries(zone_preload_prog PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
    add_test(NAME zone_preload_c COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=$<TARGET_FILE:heapkit_shared>
      $<TARGET_FILE:zone_preload_prog>)
    set_tests_properties(zone_preload_c PROPERTIES LABELS no-sanitize TIMEOUT 120
      PASS_REGULAR_EXPRESSION "preload ok")

    # Real programs from the machine, their output checked. lua5.4 and
    # sqlite3 come from .ci/install-deps.sh; a missing program is skipped.
    foreach(prog python perl gcc cmake lua sqlite)
      add_test(NAME zone_preload_${prog}
        COMMAND sh ${PROJECT_SOURCE_DIR}/tests/zone_preload.sh $<TARGET_FILE:heapkit_shared> ${prog}
          ${CMAKE_CURRENT_BINARY_DIR}/zone_preload/${prog})
      set_tests_properties(zone_preload_${prog} PROPERTIES LABELS no-sanitize TIMEOUT 300
        SKIP_RETURN_CODE 77)
    endforeach()
    set_tests_properties(zone_preload_cmake PROPERTIES RUN_SERIAL TRUE)
  endif()
endif()
