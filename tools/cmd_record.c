/*
 * tools/cmd_record.c - `heapkit record [-o FILE] -- prog args`: runs the
 * program with libheapkit-record.so preloaded, then reads the trace back
 * and prints what it holds.
 *
 * Invariant: the trace is always read back before a summary is printed,
 * so a summary names only what a reader can see.
 */
#include "analysis.h"
#include "commands.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void hk_cmd_record_help(FILE *out) {
    fprintf(out,
            "usage: heapkit record [options] -- program [args...]\n"
            "\n"
            "Runs the program with libheapkit-record.so preloaded: every malloc, calloc,\n"
            "realloc, free and aligned allocation is forwarded to the real allocator and\n"
            "recorded, with its thread, size, alignment, a time stamp and the calling stack,\n"
            "into a compact binary trace. Read it with `heapkit report`, `heapkit replay`,\n"
            "`heapkit map`. The trace stays readable up to its last complete record when\n"
            "the program ends by _exit or a signal.\n"
            "\n"
            "Programs it runs (exec) record into FILE.<pid>; so does the child of a fork\n"
            "(from the fork on: the blocks it inherited are not in its trace).\n"
            "\n"
            "options:\n"
            "  -o, --output FILE  the trace [heapkit.<program>.<pid>.hkt]\n"
            "  --frames N         stack frames kept per allocation, 0..64 [24]\n"
            "  --no-children      record this process only, not the programs it runs or forks\n"
            "  --lib PATH         the preload library   HEAPKIT_RECORD_LIB\n"
            "  -q, --quiet        no summary (the trace is not read back)\n"
            "  -h, --help         this text\n"
            "\n"
            "The exit status is the program's (128+N when signal N ended it).\n");
}

/* Prints what the trace holds (the record summary). */
static void summarize(const char *path) {
    hkt_trace t;
    char err[512];
    if (hkt_read_file(path, &t, err, sizeof err) != 0) {
        fprintf(stderr, "heapkit record: the trace cannot be read: %s\n", err);
        return;
    }
    hka a;
    if (hka_analyze(&t, &a) == 0) {
        char b1[32], b2[32], b3[32];
        fprintf(stderr,
                "heapkit record: %s: %llu allocations, %llu frees, %llu reallocs in %u thread%s, %u stacks; "
                "peak %s live in %llu blocks; %s in %llu blocks still live at the end; %s of trace%s\n",
                path, (unsigned long long)a.allocs, (unsigned long long)a.frees, (unsigned long long)a.reallocs,
                t.nthreads, t.nthreads == 1 ? "" : "s", t.nstacks ? t.nstacks - 1 : 0,
                hka_bytes(a.peak_live, b1, sizeof b1), (unsigned long long)a.peak_blocks,
                hka_bytes(a.end_live, b2, sizeof b2), (unsigned long long)a.end_blocks,
                hka_bytes(t.file_bytes, b3, sizeof b3),
                t.complete ? "" : " (not closed at exit: read up to its last complete record)");
        hka_free(&a);
    }
    hkt_free(&t);
}

int hk_cmd_record(int argc, char **argv) {
    const char *out = NULL, *lib_opt = NULL, *frames = NULL;
    int children = 1, quiet = 0, i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-') break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            hk_cmd_record_help(stdout);
            return 0;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(a, "--frames") && i + 1 < argc) {
            frames = argv[++i];
            char *end;
            long v = strtol(frames, &end, 10);
            if (*end || v < 0 || v > 64) {
                fprintf(stderr, "heapkit record: --frames wants 0..64, not '%s'\n", frames);
                return 2;
            }
        } else if (!strcmp(a, "--no-children")) {
            children = 0;
        } else if (!strcmp(a, "--lib") && i + 1 < argc) {
            lib_opt = argv[++i];
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else {
            fprintf(stderr, "heapkit record: unknown option or missing value '%s' (heapkit record --help)\n", a);
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "heapkit record: no program given\n");
        hk_cmd_record_help(stderr);
        return 2;
    }
    char prog[PATH_MAX], lib[PATH_MAX];
    if (!hk_tool_check_program("record", argv[i], prog, sizeof prog)) return 127;
    if (lib_opt)
        snprintf(lib, sizeof lib, "%s", lib_opt);
    if (lib_opt ? access(lib, R_OK) != 0 : !hk_tool_find_lib("libheapkit-record.so", "HEAPKIT_RECORD_LIB", lib, sizeof lib)) {
        fprintf(stderr, "heapkit record: libheapkit-record.so not found (set HEAPKIT_RECORD_LIB or use --lib)\n");
        return 2;
    }
    char outbuf[PATH_MAX];
    if (!out) {
        const char *base = strrchr(argv[i], '/');
        snprintf(outbuf, sizeof outbuf, "heapkit.%s.%ld.hkt", base ? base + 1 : argv[i], (long)getpid());
        out = outbuf;
    }
    char outabs[PATH_MAX + 8], envout[PATH_MAX + 32], envframes[64];
    int w;
    if (out[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
        w = snprintf(outabs, sizeof outabs, "%s/%s", cwd, out);
    } else {
        w = snprintf(outabs, sizeof outabs, "%s", out);
    }
    if (w < 0 || (size_t)w >= sizeof outabs ||
        (size_t)snprintf(envout, sizeof envout, "HEAPKIT_RECORD_OUT=%s", outabs) >= sizeof envout) {
        fprintf(stderr, "heapkit record: the trace's path is too long\n");
        return 2;
    }
    snprintf(envframes, sizeof envframes, "HEAPKIT_RECORD_FRAMES=%s", frames ? frames : "24");
    const char *env[] = {envout, "HEAPKIT_RECORD_PID=@pid", envframes,
                         children ? "HEAPKIT_RECORD_CHILDREN=1" : "HEAPKIT_RECORD_CHILDREN=0", NULL};
    unlink(outabs);
    int rc = hk_tool_run("record", prog, &argv[i], lib, env);
    if (access(outabs, R_OK) != 0) {
        if (rc != 127) fprintf(stderr, "heapkit record: the program wrote no trace (%s)\n", outabs);
        return rc ? rc : 1;
    }
    if (rc >= 128) fprintf(stderr, "heapkit record: the program was ended by signal %d\n", rc - 128);
    if (!quiet) summarize(out);
    return rc;
}
