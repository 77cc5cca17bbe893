# The zone's extras: libheapkit-malloc.so, the LD_PRELOAD malloc replacement
# on a zone (shim/zone_malloc.c), and the tests that run real programs under
# it. libheapkit.so and libheapkit.a are the API only and never replace
# malloc: a program that links them to use a pool or a hunk keeps its C
# library's malloc (tests/check_exports.cmake asserts it).
#
# Not in the sanitizer build: an ASan-instrumented malloc replacement cannot
# run under ASan's own allocator, so the shim and its tests are left out
# there (the tests carry the no-sanitize label as well).
if(NOT HEAPKIT_SANITIZE_ANY)
  add_library(heapkit_malloc SHARED ${PROJECT_SOURCE_DIR}/shim/zone_malloc.c)
  set_target_properties(heapkit_malloc PROPERTIES OUTPUT_NAME heapkit-malloc
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
  target_include_directories(heapkit_malloc PRIVATE ${PROJECT_SOURCE_DIR}/shim ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(heapkit_malloc PRIVATE heapkit heapkit_warnings)
  target_compile_definitions(heapkit_malloc PRIVATE _GNU_SOURCE)
  # The static library is linked whole into the preload; its symbols stay
  # local, so a program that also links libheapkit.so does not collide.
  target_link_options(heapkit_malloc PRIVATE -Wl,--exclude-libs,ALL)
  install(TARGETS heapkit_malloc LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

  if(BUILD_TESTING AND HEAPKIT_BUILD_TESTS)
    # libheapkit.so exports no malloc-family symbol; libheapkit-malloc.so
    # exports all of them.
    add_test(NAME packaging_exports
      COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DAPI_LIB=$<TARGET_FILE:heapkit_shared>
        -DAPI_STATIC=$<TARGET_FILE:heapkit> -DMALLOC_LIB=$<TARGET_FILE:heapkit_malloc>
        -P ${PROJECT_SOURCE_DIR}/tests/check_exports.cmake)
    set_tests_properties(packaging_exports PROPERTIES LABELS no-sanitize)

    # A C program that exercises every entry point, errno, threads and fork.
    add_executable(zone_preload_prog ${PROJECT_SOURCE_DIR}/tests/zone_preload_prog.c)
    target_link_libraries(zone_preload_prog PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
    # every call must reach the preload: clang otherwise folds malloc(huge) == NULL
    # to false and drops allocations it can prove unused
    target_compile_options(zone_preload_prog PRIVATE -fno-builtin)
    if(CMAKE_C_COMPILER_ID MATCHES "Clang") # it passes a bad alignment on purpose
      target_compile_options(zone_preload_prog PRIVATE -Wno-non-power-of-two-alignment)
    endif()
    add_test(NAME zone_preload_c COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=$<TARGET_FILE:heapkit_malloc>
      $<TARGET_FILE:zone_preload_prog>)
    set_tests_properties(zone_preload_c PROPERTIES LABELS no-sanitize TIMEOUT 120
      PASS_REGULAR_EXPRESSION "preload ok")

    # Misuse under the preload: each of the five reported, the program
    # goes on with its heap intact.
    add_executable(zone_preload_misuse_prog ${PROJECT_SOURCE_DIR}/tests/zone_preload_misuse_prog.c)
    target_link_libraries(zone_preload_misuse_prog PRIVATE Threads::Threads)
    target_compile_options(zone_preload_misuse_prog PRIVATE -fno-builtin)
    add_test(NAME zone_preload_misuse COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=$<TARGET_FILE:heapkit_malloc>
      $<TARGET_FILE:zone_preload_misuse_prog>)
    set_tests_properties(zone_preload_misuse PROPERTIES LABELS no-sanitize TIMEOUT 60
      PASS_REGULAR_EXPRESSION "misuse ok"
      FAIL_REGULAR_EXPRESSION "FAIL")

    # Every edge of the malloc family (alignments, huge sizes, errno,
    # realloc to 0) behaves as this machine's glibc does.
    add_executable(malloc_compat_prog ${PROJECT_SOURCE_DIR}/tests/malloc_compat_prog.c)
    # -O0: clang 14 crashes (SIGSEGV in its optimizer) on this file at -O1 and above
    target_compile_options(malloc_compat_prog PRIVATE -O0 -fno-builtin
      $<$<C_COMPILER_ID:GNU>:-Wno-alloc-size-larger-than>)
    add_test(NAME zone_preload_glibc_edges
      COMMAND sh ${PROJECT_SOURCE_DIR}/tests/malloc_compat.sh $<TARGET_FILE:malloc_compat_prog>
        $<TARGET_FILE:heapkit_malloc> ${CMAKE_CURRENT_BINARY_DIR}/malloc_compat)
    set_tests_properties(zone_preload_glibc_edges PROPERTIES LABELS no-sanitize TIMEOUT 60)

    # Out of memory injected at every OS call of a small workload (tests/malloc_oom.sh).
    add_executable(malloc_oom_prog ${PROJECT_SOURCE_DIR}/tests/malloc_oom_prog.c)
    target_compile_options(malloc_oom_prog PRIVATE -fno-builtin)
    add_test(NAME zone_preload_oom_sweep
      COMMAND sh ${PROJECT_SOURCE_DIR}/tests/malloc_oom.sh $<TARGET_FILE:malloc_oom_prog>
        $<TARGET_FILE:heapkit_malloc> 40)
    set_tests_properties(zone_preload_oom_sweep PROPERTIES LABELS no-sanitize TIMEOUT 120
      PASS_REGULAR_EXPRESSION "malloc oom sweep ok")

    # Memory given back to the OS (issue 21): the RSS scenario at a small
    # size, with the default decay and with HEAPKIT_DECAY_MS=0.
    add_executable(zone_trim_prog ${PROJECT_SOURCE_DIR}/tests/zone_trim_prog.c)
    target_compile_options(zone_trim_prog PRIVATE -fno-builtin)
    add_test(NAME zone_preload_trim_decay COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=$<TARGET_FILE:heapkit_malloc>
      $<TARGET_FILE:zone_trim_prog> decay)
    add_test(NAME zone_preload_trim_nodecay COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=$<TARGET_FILE:heapkit_malloc>
      HEAPKIT_DECAY_MS=0 $<TARGET_FILE:zone_trim_prog> nodecay)
    set_tests_properties(zone_preload_trim_decay zone_preload_trim_nodecay PROPERTIES LABELS no-sanitize
      TIMEOUT 60 PASS_REGULAR_EXPRESSION "trim ok")

    # Real programs from the machine, their output checked. lua5.4 and
    # sqlite3 come from .ci/install-deps.sh; a missing program is skipped.
    foreach(prog python perl gcc cmake lua sqlite)
      add_test(NAME zone_preload_${prog}
        COMMAND sh ${PROJECT_SOURCE_DIR}/tests/zone_preload.sh $<TARGET_FILE:heapkit_malloc> ${prog}
          ${CMAKE_CURRENT_BINARY_DIR}/zone_preload/${prog})
      set_tests_properties(zone_preload_${prog} PROPERTIES LABELS no-sanitize TIMEOUT 300
        SKIP_RETURN_CODE 77)
    endforeach()
    set_tests_properties(zone_preload_cmake PROPERTIES RUN_SERIAL TRUE)
  endif()
endif()
