# cmake/modules/guard.cmake - the guard heap's extra targets:
#   libheapkit-guard.so  the LD_PRELOAD malloc on the guard heap (shim/guard_malloc.c)
#   heapkit              the command line tool (tools/heapkit.c): `heapkit guard -- prog`
#   guard_corpus_*       small buggy and correct programs (tests/guard_corpus/*.c)
#   guard_workload       allocation-heavy programs for the `guard` bench suite
# and the crash tests: every corpus program run under `heapkit guard`, checked
# for the expected report kind and faulting function (label no-sanitize: they
# LD_PRELOAD a non-ASan library and die on purpose).
#
# All outputs go to the top of the build directory, where the tool and the
# bench suite look for them (next to the tool, or ../ from build/bench).

set(HK_GUARD_OUT ${PROJECT_BINARY_DIR})

add_library(heapkit_guard_preload SHARED ${PROJECT_SOURCE_DIR}/shim/guard_malloc.c
  ${PROJECT_SOURCE_DIR}/shim/guard_twin.c ${PROJECT_SOURCE_DIR}/tools/guard_isolate.c)
set_target_properties(heapkit_guard_preload PROPERTIES OUTPUT_NAME heapkit-guard
  LIBRARY_OUTPUT_DIRECTORY ${HK_GUARD_OUT})
target_include_directories(heapkit_guard_preload PRIVATE ${PROJECT_SOURCE_DIR}/shim ${PROJECT_SOURCE_DIR}/src
  ${PROJECT_SOURCE_DIR}/tools)
target_link_libraries(heapkit_guard_preload PRIVATE heapkit heapkit_warnings)
target_compile_definitions(heapkit_guard_preload PRIVATE _GNU_SOURCE)
# The static library is linked whole into the preload; keep its symbols
# local so a program that links libheapkit.so itself does not collide.
target_link_options(heapkit_guard_preload PRIVATE -Wl,--exclude-libs,ALL)
# The unwinder (stack capture) linked in, hidden, rather than libgcc_s.so.1
# loaded into every run: one library less for the loader to map and
# relocate, and no libgcc_s constructor (its cpuid probes trap to the
# hypervisor on a VM). The same for the tool, which starts before each run.
if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang" AND NOT WIN32)
  target_link_options(heapkit_guard_preload PRIVATE -static-libgcc)
endif()

add_executable(heapkit_tool ${PROJECT_SOURCE_DIR}/tools/heapkit.c ${PROJECT_SOURCE_DIR}/tools/guard_sides.c
  ${PROJECT_SOURCE_DIR}/tools/guard_isolate.c)
set_target_properties(heapkit_tool PROPERTIES OUTPUT_NAME heapkit RUNTIME_OUTPUT_DIRECTORY ${HK_GUARD_OUT})
target_link_libraries(heapkit_tool PRIVATE heapkit_warnings)
target_include_directories(heapkit_tool PRIVATE ${PROJECT_SOURCE_DIR}/shim) # options.h: the option table
target_compile_definitions(heapkit_tool PRIVATE
  HEAPKIT_INSTALL_LIBDIR="${CMAKE_INSTALL_FULL_LIBDIR}" HEAPKIT_VERSION_STRING="${PROJECT_VERSION}")
add_dependencies(heapkit_tool heapkit_guard_preload)
if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang" AND NOT WIN32)
  target_link_options(heapkit_tool PRIVATE -static-libgcc)
endif()

install(TARGETS heapkit_guard_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS heapkit_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Workload programs for bench/suite_guard.c (plain C, no heapkit inside).
add_executable(guard_workload ${PROJECT_SOURCE_DIR}/bench/guard_workload.c)
set_target_properties(guard_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${HK_GUARD_OUT})
target_compile_options(guard_workload PRIVATE -O2 -Wall -Wextra)

# ---- the corpus: one program per bug class, plus correct ones ------------------
# Built with debug info, frame pointers, no optimization and -rdynamic so the
# reports can name functions even without addr2line. No heapkit warnings:
# the bugs are on purpose.
file(GLOB HK_GUARD_CORPUS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/guard_corpus/*.c)
foreach(src ${HK_GUARD_CORPUS})
  get_filename_component(n ${src} NAME_WE)
  add_executable(guard_corpus_${n} ${src})
  set_target_properties(guard_corpus_${n} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${HK_GUARD_OUT}/guard_corpus)
  target_compile_options(guard_corpus_${n} PRIVATE -g -O0 -fno-omit-frame-pointer -fno-inline -fno-builtin -w)
  target_link_options(guard_corpus_${n} PRIVATE -rdynamic)
  target_link_libraries(guard_corpus_${n} PRIVATE Threads::Threads)
  target_compile_definitions(guard_corpus_${n} PRIVATE _GNU_SOURCE)
endforeach()

if(BUILD_TESTING AND HEAPKIT_BUILD_TESTS AND NOT HEAPKIT_SANITIZE)
  # guard_case(<test> <program> <options> <expected status: nonzero|N> <must contain...>)
  # runs `heapkit guard <options> -- <program> ${GUARD_ARGS}`; a run expected
  # to exit 0 must also not print any "heapkit guard:" line.
  function(guard_case test prog opts rc)
    set(expect ${ARGN})
    string(REPLACE ";" "|" expect_s "${expect}")
    string(REPLACE ";" "|" opts_s "${opts}")
    string(REPLACE ";" "|" args_s "${GUARD_ARGS}")
    add_test(NAME guard_corpus.${test}
      COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:heapkit_tool> "-DOPTS=${opts_s}"
        "-DPROG=${prog}" "-DARGS=${args_s}" -DRC=${rc} "-DEXPECT=${expect_s}"
        "-DFORBID=${GUARD_FORBID}" "-DONCE=${GUARD_ONCE}" "-DULIMIT_V=${GUARD_ULIMIT_V}" "-DSTDIN=${GUARD_STDIN}"
        -P ${PROJECT_SOURCE_DIR}/tests/guard_corpus/run_case.cmake)
    set_tests_properties(guard_corpus.${test} PROPERTIES LABELS "no-sanitize;guard" TIMEOUT 120)
    # a default run that counts on the second run (an underflow at the access): skipped, and
    # shown as such, where the machine cannot isolate it (the tool then runs once and says so)
    if(opts_s STREQUAL "" AND expect_s MATCHES "heap underflow \\(")
      set_tests_properties(guard_corpus.${test} PROPERTIES SKIP_REGULAR_EXPRESSION "could not be isolated")
    endif()
  endfunction()
  set(C ${HK_GUARD_OUT}/guard_corpus/guard_corpus_)

  guard_case(overflow_write       ${C}overflow_write "" nonzero "heap overflow (write of" "0 bytes past its end" "fill_past_end" "allocated at:" "make_buffer")
  guard_case(overflow_read        ${C}overflow_read "" nonzero "heap overflow (read of" "sum_one_too_many")
  # by default a 13-byte block is 2-aligned (python3 needs it): the byte after it is
  # padding, an overwrite there is found at free
  guard_case(overflow_pad_write   ${C}overflow_pad_write "" nonzero "heap overflow: write past the end of 13-byte block" "found at free: padding damaged at offset +13" "release_record" "make_record")
  # --align-min 1: aligned as its size needs (1), it ends on the guard page
  guard_case(overflow_pad_write_align1 ${C}overflow_pad_write "--align-min;1" nonzero "heap overflow (write of 1 byte)" "0 bytes past its end" "terminate_record" "make_record")
  guard_case(overflow_pad_read_align1 ${C}overflow_pad_read "--align-min;1" nonzero "heap overflow (read of 1 byte)" "peek_past_name")
  # --align-all (every block 16-aligned, as glibc): the byte lands in padding, found at free
  guard_case(overflow_pad_write_align_all ${C}overflow_pad_write "--align-all" nonzero "heap overflow: write past the end of 13-byte block" "found at free: padding damaged at offset +13" "freed at:" "release_record" "make_record")
  guard_case(overflow_pad_exact   ${C}overflow_pad_write "--exact" nonzero "heap overflow (write of" "terminate_record")
  guard_case(overflow_pad_read_exact ${C}overflow_pad_read "--exact" nonzero "heap overflow (read of" "peek_past_name")
  # an aligned request keeps its alignment (and so its padding): the overwrite is found at free
  guard_case(overflow_aligned_pad ${C}overflow_aligned_pad "" nonzero "heap overflow: write past the end of 50-byte block" "found at free: padding damaged at offsets +50 to +51" "make_aligned")
  guard_case(underflow_write      ${C}underflow_write "--side;start" nonzero "heap underflow (write of" "1 byte before its start" "write_before_start")
  # one side: the underwrite lands in padding, found at free
  guard_case(underflow_write_late ${C}underflow_write "--sides;trailing" nonzero "heap underflow: write before the start of 32-byte block" "found at free: padding damaged at offset -1" "discard_buffer")
  # the default: the second run faults at the write; that report is shown, the first run's
  # report of the same bug (found at free) is not
  set(GUARD_FORBID "found at free")
  guard_case(underflow_write_default ${C}underflow_write "" nonzero "heap underflow (write of 1 byte)" "1 byte before its start" "write_before_start")
  unset(GUARD_FORBID)
  guard_case(underflow_read       ${C}underflow_read "--side;start" nonzero "heap underflow (read of" "read_before_start")
  # the default runs both sides (standard input is not a terminal here): the under-read is reported
  guard_case(underflow_read_default ${C}underflow_read "" nonzero "heap underflow (read of 8 bytes)" "read_before_start" "allocated at:")
  # both runs see these bugs; each is shown once (no summary line by default)
  set(GUARD_FORBID "--sides both:")
  set(GUARD_ONCE "use after free")
  guard_case(uaf_read_default_quiet ${C}uaf_read "" nonzero "use after free (read of")
  set(GUARD_ONCE "heap overflow")
  guard_case(overflow_write_default_once ${C}overflow_write "" nonzero "heap overflow (write of" "fill_past_end")
  unset(GUARD_ONCE)
  unset(GUARD_FORBID)
  # Juliet's CWE-127 patterns (a pointer before the block, then a copy): the default reports them
  guard_case(underread_memcpy     ${C}underread_memcpy "" nonzero "heap underflow (read of" "before its start" "copy_from" "allocated at:")
  guard_case(underread_wide_loop  ${C}underread_wide_loop "" nonzero "heap underflow (read of 4 bytes)" "32 bytes before its start" "copy_wide")
  # more of Juliet's shapes, one per class (docs/guard.md, "The corpus under every checker")
  guard_case(underread_char       ${C}underread_char "" nonzero "heap underflow (read of 1 byte)" "1 byte before its start" "trailing_spaces_before")
  guard_case(overread_memcpy      ${C}overread_memcpy "" nonzero "heap overflow (read of" "copy_out" "allocated at:")
  set(GUARD_FORBID "found at free")
  guard_case(underwrite_memmove   ${C}underwrite_memmove "" nonzero "heap underflow (write of" "8 bytes before its start" "move_into")
  unset(GUARD_FORBID)
  guard_case(underwrite_memmove_trailing ${C}underwrite_memmove "--sides;trailing" nonzero "found at free: padding damaged at offsets -8 to -1")
  guard_case(overflow_wide_loop   ${C}overflow_wide_loop "" nonzero "heap overflow (write of 4 bytes)" "0 bytes past its end" "fill_wide")
  guard_case(double_free_sink     ${C}double_free_sink "" nonzero "double free" "already freed" "sink" "freed at:" "source")
  guard_case(leak_loop            ${C}leak_loop "" 23 "leak: 400 bytes in 4 blocks unreachable" "make_line")
  # one run with the guard page after each block: the under-read lands in padding
  guard_case(underflow_read_trailing ${C}underflow_read "--sides;trailing" 0)
  # where the second run cannot be isolated (--no-isolate: as if), the default runs once and says
  # the under-reads are not checked; --sides both runs the second anyway
  guard_case(underflow_read_no_isolate ${C}underflow_read "--no-isolate" 0 "under-reads not checked" "could not be isolated")
  guard_case(sides_both_no_isolate ${C}underflow_read "--sides;both;--no-isolate" nonzero "heap underflow (read of 8 bytes)" "was not isolated")
  guard_case(uaf_read             ${C}uaf_read "" nonzero "use after free (read of" "freed at:" "read_after_free" "drop_node")
  guard_case(uaf_write            ${C}uaf_write "" nonzero "use after free (write of" "freed at:" "write_after_free")
  guard_case(uaf_realloc          ${C}uaf_realloc "" nonzero "use after free (read of" "read_stale" "freed at:")
  # malloc(11): 2-aligned by default, the terminating NUL lands in the padding byte (found at free)
  guard_case(overflow_strcpy      ${C}overflow_strcpy "" nonzero "heap overflow: write past the end of 11-byte block" "found at free: padding damaged at offset +11" "copy_name" "allocated at:")
  guard_case(overflow_strcpy_align1 ${C}overflow_strcpy "--align-min;1" nonzero "heap overflow" "0 bytes past its end" "copy_name" "allocated at:")
  guard_case(double_free          ${C}double_free "" nonzero "double free" "already freed" "free_twice" "freed at:")
  guard_case(double_free_no_abort ${C}double_free "--no-abort" 23 "double free" "still running after the double free")
  # a flag with a value, through the option table to the preload
  guard_case(double_free_exitcode ${C}double_free "--no-abort;--exitcode;7" 7 "double free")
  guard_case(invalid_free_stack   ${C}invalid_free_stack "" nonzero "foreign pointer" "never returned" "free_stack_buffer")
  guard_case(invalid_free_global  ${C}invalid_free_global "" nonzero "foreign pointer" "never returned" "free_global_table")
  guard_case(invalid_free_wild    ${C}invalid_free_wild "" nonzero "foreign pointer" "never returned" "free_wild")
  guard_case(invalid_free_wild_no_abort ${C}invalid_free_wild "--no-abort" 23 "foreign pointer" "invalid_free_wild still running")
  guard_case(interior_free        ${C}interior_free "" nonzero "interior pointer" "offset +8 of 64-byte block" "free_interior")
  guard_case(realloc_after_free   ${C}realloc_after_free "" nonzero "use after free: realloc of freed block" "grow_freed")
  guard_case(leak                 ${C}leak "" 23 "leak: 96 bytes in 3 blocks unreachable" "leaky_alloc" "leak summary: 96 bytes in 3 blocks")
  guard_case(leak_off             ${C}leak "--no-leaks" 0)
  # padding damage on blocks live at exit: reported whether or not leaks are
  guard_case(pad_live_under       ${C}pad_live_under "--sides;trailing" 23 "heap underflow: write before the start of live 100-byte block" "found at exit: padding damaged at offsets -8 to -1" "allocated at:" "make_label")
  guard_case(pad_live_under_no_leaks ${C}pad_live_under "--sides;trailing;--no-leaks" 23 "write before the start of live 100-byte block" "found at exit" "make_label")
  # the default: the second run faults at the underwrite (the first run's status, 23, is kept)
  guard_case(pad_live_under_default ${C}pad_live_under "" 23 "heap underflow (write of" "8 bytes before its start" "allocated at:" "make_label")
  guard_case(pad_live_over        ${C}pad_live_over "" nonzero "heap overflow (write of 1 byte)" "overrun_pair" "make_pair")
  guard_case(pad_live_over_align_all ${C}pad_live_over "--align-all" 23 "heap overflow: write past the end of live 50-byte block" "padding damaged at offsets +50 to +51" "make_pair")
  guard_case(pad_live_over_no_leaks ${C}pad_live_over "--align-all;--no-leaks" 23 "write past the end of live 50-byte block" "make_pair")
  # a smashed stack: the captures survive it; the crash is reported once, with the program's frame
  set(GUARD_FORBID "fault inside the fault handler|os_posix|hk_os_")
  set(GUARD_ONCE "heapkit guard:")
  guard_case(stack_smash          ${C}stack_smash "" nonzero "outside every guard heap" "smash_buffer")
  unset(GUARD_FORBID)
  unset(GUARD_ONCE)
  # a stale copy of the pointer in a dead frame (below the stack pointer) hides nothing
  guard_case(leak_dead_stack      ${C}leak_dead_stack "" 23 "leak: 64 bytes in 1 block unreachable" "leave_pointer_behind" "leak summary: 64 bytes in 1 block from 1 allocation stack")
  # the same in another thread, parked at exit: the scan stops it and reads its stack from its stack pointer
  guard_case(leak_thread_dead_stack ${C}leak_thread_dead_stack "" 23 "leak: 72 bytes in 1 block unreachable" "thread_leaves_pointer" "leak summary: 72 bytes in 1 block from 1 allocation stack")
  guard_case(ok_stdio             ${C}ok_stdio "" 0 "ok_stdio done")
  guard_case(ok_stdio_leaks_all   ${C}ok_stdio "--leaks-all" 0 "ok_stdio done")
  # under `ulimit -v 4000000` the heap takes what the limit allows and says how much;
  # with no room for any heap the program is not run unchecked (status 125, before main)
  set(GUARD_ULIMIT_V 4000000)
  guard_case(ulimit_ok_basic      ${C}ok_basic "" 0 "address space limited (ulimit -v)" "MiB reserved for guarded blocks" "ok_basic done")
  guard_case(ulimit_leak          ${C}leak "" 23 "leak: 96 bytes in 3 blocks unreachable")
  set(GUARD_ULIMIT_V 40000)
  set(GUARD_FORBID "ok_basic done")
  guard_case(ulimit_no_heap       ${C}ok_basic "" 125 "cannot create the guard heap" "not running the program unchecked")
  unset(GUARD_FORBID)
  unset(GUARD_ULIMIT_V)
  # --sides both: trailing then leading guard, same input, the union of the reports, each once
  guard_case(sides_both_underflow_read ${C}underflow_read "--sides;both" nonzero "heap underflow (read of 8 bytes)" "read_before_start" "--sides both: 1 report (trailing guard: 0, leading guard: 1")
  set(GUARD_ONCE "leak summary: 96 bytes in 3 blocks")
  guard_case(sides_both_leak      ${C}leak "--sides;both" 23 "leak: 96 bytes in 3 blocks unreachable" "--sides both: 2 reports")
  unset(GUARD_ONCE)
  guard_case(sides_both_overflow  ${C}overflow_read "--sides;both" nonzero "heap overflow (read of" "sum_one_too_many")
  guard_case(sides_both_ok        ${C}ok_basic "--sides;both" 0 "ok_basic done" "--sides both: 0 reports")
  set(GUARD_STDIN ${PROJECT_SOURCE_DIR}/tests/guard_corpus/underread_stdin.input)
  guard_case(underread_stdin      ${C}underread_stdin "" nonzero "heap underflow (read of 8 bytes)" "read_at")
  guard_case(underread_stdin_trailing ${C}underread_stdin "--sides;trailing" 0 "0")
  guard_case(sides_both_underread_stdin ${C}underread_stdin "--sides;both" nonzero "heap underflow (read of 8 bytes)" "read_at")
  unset(GUARD_STDIN)
  guard_case(uninit_pointer       ${C}uninit_read "" nonzero "uninitialized heap memory used as a pointer" "0xcd" "follow_uninit")
  guard_case(ok_basic             ${C}ok_basic "" 0 "ok_basic done")
  guard_case(ok_basic_start       ${C}ok_basic "--side;start" 0 "ok_basic done")
  guard_case(ok_basic_random_exact ${C}ok_basic "--side;random;--exact" 0 "ok_basic done")
  guard_case(ok_basic_sampled     ${C}ok_basic "--sample;10" 0 "ok_basic done")
  guard_case(ok_basic_discard     ${C}ok_basic "--discard-freed;--quarantine;0" 0 "ok_basic done")
  guard_case(uaf_read_discard     ${C}uaf_read "--discard-freed" nonzero "use after free (read of" "read_after_free")
  # allocation/free stacks by the DWARF unwinder instead of the learned walker: the same names
  guard_case(uaf_read_exact_stacks ${C}uaf_read "--exact-stacks" nonzero "use after free (read of" "freed at:" "read_after_free" "drop_node")
  guard_case(ok_basic_sampled_checked ${C}ok_basic "--sample;3;--checked-unguarded" 0 "ok_basic done")
  guard_case(ok_threads_sampled   ${C}ok_threads "--sample;3" 0 "ok_threads done")
  guard_case(ok_odd_sizes         ${C}ok_odd_sizes "" 0 "ok_odd_sizes done")
  guard_case(ok_list              ${C}ok_list "" 0 "ok_list done")
  guard_case(ok_threads           ${C}ok_threads "" 0 "ok_threads done")
  guard_case(ok_uninit            ${C}ok_uninit "" 0 "ok_uninit done")
  guard_case(ok_fork              ${C}ok_fork "" 0 "ok_fork done 0")
  guard_case(many_live            ${C}many_live "" 0 "many_live done 100000")
  guard_case(many_live_sampled    ${C}many_live "--sample;4" 0 "many_live done 100000")

  # Real programs run clean on the guard heap.
  find_program(HK_GUARD_PYTHON NAMES python3 PATHS /usr/bin /usr/local/bin NO_DEFAULT_PATH)
  if(NOT HK_GUARD_PYTHON)
    find_program(HK_GUARD_PYTHON NAMES python3)
  endif()
  if(HK_GUARD_PYTHON)
    set(GUARD_ARGS ${PROJECT_SOURCE_DIR}/tests/guard_corpus/real_python.py)
    # python3 needs its blocks 2-aligned whatever their size (with odd-sized
    # blocks at odd addresses it stops at start-up: "error reading frozen
    # getpath.py"): the default; see docs/guard.md, "Alignment"
    guard_case(real_python3 ${HK_GUARD_PYTHON} "" 0 "python ok")
    guard_case(real_python3_sampled ${HK_GUARD_PYTHON} "--sample;50" 0 "python ok")
    unset(GUARD_ARGS)
  endif()
  find_program(HK_GUARD_PERL NAMES perl)
  if(HK_GUARD_PERL)
    set(GUARD_ARGS ${PROJECT_SOURCE_DIR}/tests/guard_corpus/real_perl.pl)
    # perl frees its interpreter's memory at exit only with
    # PERL_DESTRUCT_LEVEL=2 (perlhacktips: the setting for leak checkers);
    # without it Valgrind also finds ~170 KB "definitely lost". So: the leak
    # check with it, and the memory-error checks alone without it.
    guard_case(real_perl ${HK_GUARD_PERL} "" 0 "perl ok")
    set_tests_properties(guard_corpus.real_perl PROPERTIES ENVIRONMENT PERL_DESTRUCT_LEVEL=2)
    guard_case(real_perl_no_leak_check ${HK_GUARD_PERL} "--no-leaks" 0 "perl ok")
    unset(GUARD_ARGS)
  endif()
  # Real programs with the tool's defaults (tests/guard_programs.sh): the same
  # output as without the guard, no report; the second run's writes isolated.
  foreach(prog python3 perl lua sqlite git cc1 isolation no_isolation addr2line stdin terminal twin)
    add_test(NAME guard_programs.${prog}
      COMMAND sh ${PROJECT_SOURCE_DIR}/tests/guard_programs.sh $<TARGET_FILE:heapkit_tool> ${prog}
        ${PROJECT_BINARY_DIR}/guard_programs/${prog})
    set_tests_properties(guard_programs.${prog} PROPERTIES LABELS "no-sanitize;guard" TIMEOUT 300
      SKIP_RETURN_CODE 77)
  endforeach()
  add_test(NAME guard_tool_help COMMAND heapkit_tool guard --help)
  set_tests_properties(guard_tool_help PROPERTIES LABELS "no-sanitize;guard"
    PASS_REGULAR_EXPRESSION "HEAPKIT_GUARD_SAMPLE")
  add_test(NAME guard_tool_bad_option COMMAND heapkit_tool guard --side middle -- true)
  set_tests_properties(guard_tool_bad_option PROPERTIES LABELS "no-sanitize;guard" WILL_FAIL TRUE)
  add_test(NAME guard_tool_bad_value COMMAND heapkit_tool guard --quarantine lots -- true)
  set_tests_properties(guard_tool_bad_value PROPERTIES LABELS "no-sanitize;guard" WILL_FAIL TRUE)
  # a report whose frames cannot get file:line says which packages would
  # give them (neither libdw.so.1 nor addr2line: PATH without addr2line)
  add_test(NAME guard_tool_no_symbolizer_said COMMAND sh -c
    "mkdir -p nobin && ln -sf /bin/sh nobin/sh && HEAPKIT_NO_LIBDW=1 PATH=$PWD/nobin $<TARGET_FILE:heapkit_tool> guard --sides trailing -- $<TARGET_FILE:guard_corpus_overflow_strcpy> 2>&1; true")
  set_tests_properties(guard_tool_no_symbolizer_said PROPERTIES LABELS "no-sanitize;guard"
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR} PASS_REGULAR_EXPRESSION "neither libdw.so.1 \\(Debian: libdw1\\) nor addr2line")
  # a report whose lines come from addr2line because libdw.so.1 did not
  # load says that libdw1 makes reports faster (a libdw.so.1 without
  # libdw's functions, found first)
  add_library(hk_fake_libdw SHARED ${PROJECT_SOURCE_DIR}/tests/guard_fake_libdw.c)
  set_target_properties(hk_fake_libdw PROPERTIES PREFIX "" OUTPUT_NAME "libdw" SUFFIX ".so.1"
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fakedw)
  add_test(NAME guard_tool_slow_symbolizer_said COMMAND sh -c
    "LD_LIBRARY_PATH=${PROJECT_BINARY_DIR}/fakedw $<TARGET_FILE:heapkit_tool> guard --sides trailing -- $<TARGET_FILE:guard_corpus_overflow_strcpy> 2>&1; true")
  set_tests_properties(guard_tool_slow_symbolizer_said PROPERTIES LABELS "no-sanitize;guard"
    PASS_REGULAR_EXPRESSION "file:line from addr2line processes: libdw.so.1 did not load")
  # `heapkit env` lists every variable of the option table, the zone's too,
  # and says when a set value is not valid (the libraries ignore it)
  add_test(NAME guard_tool_env COMMAND heapkit_tool env)
  set_tests_properties(guard_tool_env PROPERTIES LABELS "no-sanitize;guard"
    ENVIRONMENT "HEAPKIT_GUARD_SIDE=middle"
    PASS_REGULAR_EXPRESSION "set here: middle \\(not valid: ignored\\).*HEAPKIT_QUIET.*HEAPKIT_STATS.*HEAPKIT_GUARD_LIB")
endif()
