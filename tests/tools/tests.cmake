# tests/tools/tests.cmake - the trace tools' tests (included by
# cmake/modules/tools.cmake). The record tests preload a malloc interposer,
# so they are not run in sanitizer builds (label no-sanitize).
set(HK_TT ${PROJECT_SOURCE_DIR}/tests/tools)

add_executable(tools_roundtrip_check ${HK_TT}/roundtrip_check.c ${HK_TOOLS_DIR}/trace.c
  ${HK_TOOLS_DIR}/analysis.c ${HK_TOOLS_DIR}/replay.c ${PROJECT_SOURCE_DIR}/bench/harness.c)
target_include_directories(tools_roundtrip_check PRIVATE ${HK_TOOLS_DIR} ${PROJECT_SOURCE_DIR}/bench)
target_link_libraries(tools_roundtrip_check PRIVATE heapkit heapkit_warnings Threads::Threads ${CMAKE_DL_LIBS})
target_compile_definitions(tools_roundtrip_check PRIVATE _GNU_SOURCE)

# the recorded program: plain C, frame info kept so stacks name its functions;
# -fno-builtin: every call reaches the preload (clang drops malloc/free pairs)
add_executable(tools_record_prog ${HK_TT}/record_prog.c)
target_compile_options(tools_record_prog PRIVATE -g -O1 -fno-omit-frame-pointer -fno-builtin -Wall)
target_link_libraries(tools_record_prog PRIVATE Threads::Threads)

if(NOT HEAPKIT_SANITIZE AND NOT HEAPKIT_TSAN)
  foreach(mode exit _exit kill fork)
    string(REPLACE "_exit" "raw_exit" tn ${mode})
    add_test(NAME tools_record_roundtrip_${tn}
      COMMAND sh ${HK_TT}/record_roundtrip.sh $<TARGET_FILE:heapkit_tool> $<TARGET_FILE:tools_record_prog>
        $<TARGET_FILE:tools_roundtrip_check> ${CMAKE_CURRENT_BINARY_DIR}/tools_rt_${tn} ${mode})
    set_tests_properties(tools_record_roundtrip_${tn} PROPERTIES LABELS "no-sanitize;tools" TIMEOUT 120
      PASS_REGULAR_EXPRESSION "roundtrip ok" FAIL_REGULAR_EXPRESSION "FAIL")
  endforeach()
  add_test(NAME tools_record_unclaimed_out
    COMMAND sh ${HK_TT}/record_unclaimed.sh $<TARGET_FILE:heapkit_tool> $<TARGET_FILE:heapkit_record_preload>
      $<TARGET_FILE:tools_record_prog> ${CMAKE_CURRENT_BINARY_DIR}/tools_rt_unclaimed)
  set_tests_properties(tools_record_unclaimed_out PROPERTIES LABELS "no-sanitize;tools" TIMEOUT 120
    PASS_REGULAR_EXPRESSION "record unclaimed ok" FAIL_REGULAR_EXPRESSION "FAIL")
  add_test(NAME tools_trace_addresses COMMAND tools_roundtrip_check addresses -)
  set_tests_properties(tools_trace_addresses PROPERTIES LABELS tools
    PASS_REGULAR_EXPRESSION "roundtrip ok" FAIL_REGULAR_EXPRESSION "FAIL")
  add_test(NAME tools_report_idle_curve COMMAND tools_roundtrip_check idle -)
  set_tests_properties(tools_report_idle_curve PROPERTIES LABELS tools
    PASS_REGULAR_EXPRESSION "roundtrip ok" FAIL_REGULAR_EXPRESSION "FAIL")
  add_test(NAME tools_record_no_program COMMAND heapkit_tool record -- /nonexistent/program)
  set_tests_properties(tools_record_no_program PROPERTIES LABELS "no-sanitize;tools"
    PASS_REGULAR_EXPRESSION "heapkit record: no program '/nonexistent/program'")
  # a statically linked program cannot be recorded; the tool says so
  include(CheckCSourceCompiles)
  set(CMAKE_REQUIRED_LINK_OPTIONS -static)
  check_c_source_compiles("int main(void){return 0;}" HK_CAN_LINK_STATIC)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(HK_CAN_LINK_STATIC)
    add_executable(tools_static_prog ${HK_TT}/static_prog.c)
    target_link_options(tools_static_prog PRIVATE -static)
    add_test(NAME tools_record_static_program COMMAND heapkit_tool record -- $<TARGET_FILE:tools_static_prog>)
    set_tests_properties(tools_record_static_program PROPERTIES LABELS "no-sanitize;tools"
      PASS_REGULAR_EXPRESSION "is statically linked: a preload library cannot see its allocations")
  endif()
endif()

if(NOT HEAPKIT_SANITIZE AND NOT HEAPKIT_TSAN)
  # the report and a heap map in a real browser (skipped without chromium)
  add_test(NAME tools_report_in_browser
    COMMAND sh ${HK_TT}/browser_check.sh $<TARGET_FILE:heapkit_tool> $<TARGET_FILE:tools_record_prog>
      ${CMAKE_CURRENT_BINARY_DIR}/tools_browser)
  set_tests_properties(tools_report_in_browser PROPERTIES LABELS "no-sanitize;tools" TIMEOUT 300
    SKIP_RETURN_CODE 77 PASS_REGULAR_EXPRESSION "browser ok" RUN_SERIAL TRUE)
endif()

if(NOT HEAPKIT_SANITIZE AND NOT HEAPKIT_TSAN)
  # heapkit stats: the zone's statistics and the size histogram of a known program
  add_test(NAME tools_stats_histogram COMMAND heapkit_tool stats -- $<TARGET_FILE:tools_record_prog> exit)
  set_tests_properties(tools_stats_histogram PROPERTIES LABELS "no-sanitize;tools"
    PASS_REGULAR_EXPRESSION "16 KiB \\.\\. 32767 B +806 .*zone 'malloc': [0-9]+ allocations")
endif()
