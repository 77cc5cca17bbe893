/*
 * fuzz/standalone_main.c - runs a libFuzzer target without libFuzzer, so
 * every compiler can build the targets and CTest can run them as a smoke
 * test: N pseudo-random inputs (argv[1], default 2000) of random lengths,
 * plus every file named after it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    long runs = argc > 1 ? atol(argv[1]) : 2000;
    uint64_t s = 0x243F6A8885A308D3ull;
    static uint8_t buf[4096];
    for (int i = 2; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
    }
    for (long r = 0; r < runs; r++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        size_t n = (size_t)(s % sizeof buf);
        for (size_t i = 0; i < n; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            buf[i] = (uint8_t)s;
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("%ld inputs run\n", runs);
    return 0;
}
