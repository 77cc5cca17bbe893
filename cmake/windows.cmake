# cmake/windows.cmake - the Windows build (MinGW-w64, cmake/mingw-w64.cmake;
# tests under Wine). What it leaves out, and why: never silently.
#
# Left out of a Windows build (POSIX-only by design; see docs/windows.md):
#   libheapkit-malloc.so, libheapkit-guard.so, libheapkit-record.so,
#   libheapkit-stats.so   LD_PRELOAD shims (shim/): Windows has no LD_PRELOAD.
#                         Instead: link heapkit and route allocations through
#                         it (include/heapkit/guard_override.h for the guard).
#   heapkit (the tool)    runs programs under those preloads (fork/exec,
#                         LD_PRELOAD), and with it the tests of cmake/modules/
#                         guard.cmake (guard_corpus.*, guard_tool_*, guard_programs.*) and
#                         tools.cmake (tests/tools/), and zone.cmake's
#                         zone_preload_* and packaging_exports (ELF symbols).
#   heapkit-bench         runs suites in child processes with fork and
#                         LD_PRELOAD (bench/harness.c); bench_threads_smoke.
# Test cases left out (their file builds; the case is compiled out with
# #ifndef _WIN32 and removed from the registration list): HK_WIN32_SKIPPED_CASES
# below, each with its reason. tests/CMakeLists.txt adds the test
# `windows_skipped_cases`, which prints this list in every run.

message(STATUS "heapkit: Windows build: no LD_PRELOAD shims, no heapkit tool, no bench (docs/windows.md)")

# <file short name>:<case>:<reason>
set(HK_WIN32_SKIPPED_CASES
  "core:os_fault_callbacks:forks a child to fault in (Windows has no fork); test_fault_exit covers the handler there"
  "core:os_stop_world_single_then_threaded:counts on no thread but main at start (Windows and Wine start threads of their own)"
  "core:os_fast_stacks_match_backtrace:compares with glibc's backtrace() (execinfo.h); Windows captures exactly with RtlCaptureStackBackTrace"
  "guard_fault:guard_fault_reports:forks a child per fault (no fork); test_fault_exit runs the same faults in child processes"
  "guard_fault:guard_fast_reuse:the second run of heapkit guard (fork per fault, and the tool itself, are POSIX-only)"
  "guard_reports:guard_reserve_shrinks_under_address_space_limit:setrlimit(RLIMIT_AS) and fork (no address-space limit on Windows)"
  "zone:prefault_first_region_and_growth:counts page faults (getrusage); Wine keeps no count (GetProcessMemoryInfo's PageFaultCount stays 0: measured), so lazy and prefaulted pages cannot be told apart there"
  "zone:zone_growing_zone_reserves_less_under_address_space_limit:setrlimit(RLIMIT_AS) and fork (no address-space limit on Windows)"
  "zone_threads:fork_child_frees_other_threads_blocks:fork() (Windows has no fork)"
)
