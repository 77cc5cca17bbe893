/*
 * tests/guard_fake_libdw.c - a library named libdw.so.1 without libdw's
 * functions, found first through LD_LIBRARY_PATH by the test
 * guard_tool_slow_symbolizer_said: the symbolizer's dlopen of libdw.so.1
 * succeeds, its lookups fail, and reports fall back to addr2line, which a
 * report must say once.
 */
int hk_test_fake_libdw(void);
int hk_test_fake_libdw(void) { return 1; }
