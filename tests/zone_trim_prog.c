/* The RSS scenario of issue 21 §4 at a small size, run under
 * LD_PRELOAD=libheapkit-malloc.so (CTest zone_preload_trim_*): 400 000
 * blocks of 64 bytes (about 33 MiB resident), all freed, one idle second
 * with a small malloc/free every 50 ms, malloc_trim(0), then four 5 MiB
 * blocks (bench/rss_scenario.h, the same code suite trim measures).
 *   zone_trim_prog decay     the default decay: resident <= 15% of the peak
 *                            after the idle second, <= 10% after malloc_trim,
 *                            the four blocks placed without passing the peak
 *   zone_trim_prog nodecay   HEAPKIT_DECAY_MS=0: nothing goes back while
 *                            idle (>= 80% kept), malloc_trim still does
 * Prints "trim ok" when the figures hold. */
#include "../bench/rss_scenario.h"

int main(int argc, char **argv) {
    int decay = argc > 1 && !strcmp(argv[1], "decay");
    rss_params p = {400000, 64, 1000, (size_t)5 << 20};
    rss_result r;
    rss_scenario(&p, &r);
    printf(
        "peak %.0f KiB, idle %.0f KiB (%.1f%%), after malloc_trim %.0f KiB (%.1f%%), four 5 MiB blocks %.0f "
        "KiB (%.1f%%)\n",
        r.peak_kib, r.idle_kib, r.idle_pct, r.trim_kib, r.trim_pct, r.big_kib, r.big_pct);
    int ok = r.ok && r.peak_kib > 20000 && r.trim_pct <= 10.0 && r.big_pct <= 100.0 &&
             (decay ? r.idle_pct <= 15.0 : r.idle_pct >= 80.0);
    printf("%s\n", ok ? "trim ok" : "trim FAILED");
    return ok ? 0 : 1;
}
