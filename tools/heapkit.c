/*
 * tools/heapkit.c - the `heapkit` command.
 *
 *   heapkit <command> [options] [-- program args...]
 *
 * Commands live in one table (k_commands below): a name, a one-line
 * summary, a help printer and a main. Adding a command is one entry and one
 * function.
 *
 *   heapkit guard [options] -- program args...
 *       runs the program on the guard heap (libheapkit-guard.so through
 *       LD_PRELOAD), like Electric Fence's `ef`.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"

#ifndef HEAPKIT_INSTALL_LIBDIR
#define HEAPKIT_INSTALL_LIBDIR "/usr/local/lib"
#endif
#ifndef HEAPKIT_VERSION_STRING
#define HEAPKIT_VERSION_STRING "0.1.0"
#endif

typedef struct hk_command {
    const char *name;
    const char *summary;
    void (*help)(FILE *out);
    int (*main)(int argc, char **argv); /* argv[0] is the command name */
} hk_command;

static int cmd_guard(int argc, char **argv);
static void help_guard(FILE *out);
static int cmd_help(int argc, char **argv);
static void help_help(FILE *out);

static const hk_command k_commands[] = {
    {"guard", "run a program on the page-protected guard heap (overflows, use after free, leaks)", help_guard,
     cmd_guard},
    {"record", "record every allocation of a program into a trace", hk_cmd_record_help, hk_cmd_record},
    {"replay", "replay a trace on zone, glibc, mimalloc, jemalloc, tcmalloc side by side", hk_cmd_replay_help,
     hk_cmd_replay},
    {"report", "an HTML page of a trace: live bytes, top sites, histograms, leaks, heap map", hk_cmd_report_help,
     hk_cmd_report},
    {"map", "an SVG heap map of a trace replayed on a zone, at its peak or any moment", hk_cmd_map_help,
     hk_cmd_map},
    {"stats", "run a program on libheapkit-malloc.so: zone statistics and a size histogram", hk_cmd_stats_help,
     hk_cmd_stats},
    {"help", "show help for a command", help_help, cmd_help},
};
#define HK_NCOMMANDS (sizeof k_commands / sizeof k_commands[0])

static void usage(FILE *out) {
    fprintf(
        out,
        "heapkit %s - memory tools\n\nusage: heapkit <command> [options] [-- program args...]\n\ncommands:\n",
        HEAPKIT_VERSION_STRING);
    for (size_t i = 0; i < HK_NCOMMANDS; i++)
        fprintf(out, "  %-8s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(out, "\n`heapkit help <command>` or `heapkit <command> --help` for details.\n");
}

static const hk_command *find_command(const char *name) {
    for (size_t i = 0; i < HK_NCOMMANDS; i++)
        if (strcmp(k_commands[i].name, name) == 0) return &k_commands[i];
    return NULL;
}

static void help_help(FILE *out) { fprintf(out, "usage: heapkit help [command]\n"); }

static int cmd_help(int argc, char **argv) {
    if (argc < 2) {
        usage(stdout);
        return 0;
    }
    const hk_command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "heapkit: unknown command '%s'\n", argv[1]);
        return 2;
    }
    c->help(stdout);
    return 0;
}

/* ---- guard --------------------------------------------------------------------- */

static void help_guard(FILE *out) {
    fprintf(out,
            "usage: heapkit guard [options] -- program [args...]\n"
            "\n"
            "Runs the program with every malloc on its own pages between inaccessible\n"
            "guard pages (libheapkit-guard.so via LD_PRELOAD). Overflows, underflows and\n"
            "uses after free fault at the access and are reported with the faulting,\n"
            "allocation and free stacks; double and invalid frees are reported too; live\n"
            "unreachable blocks are reported at exit. After any report the process exits\n"
            "non-zero (aborts at the first fault/misuse; status 23 for leaks or with\n"
            "--no-abort).\n"
            "\n"
            "options (each sets the environment variable shown):\n"
            "  --side end|start|random  block placed against the trailing guard (overruns\n"
            "                           fault at once), the leading one (underruns), or\n"
            "                           either at random          HEAPKIT_GUARD_SIDE [end]\n"
            "  --align N                block alignment            HEAPKIT_GUARD_ALIGN [16]\n"
            "  --exact                  alignment 1: every overrun faults at once\n"
            "  --quarantine BYTES       freed bytes kept inaccessible (k/m/g suffixes; 0: none)\n"
            "                                                      HEAPKIT_GUARD_QUARANTINE [8m] \n"
            "  --quarantine-blocks N    freed blocks kept          HEAPKIT_GUARD_QUARANTINE_BLOCKS [8192]\n"
            "  --sample N               guard one allocation in N on average, the rest on\n"
            "                           glibc (production runs)    HEAPKIT_GUARD_SAMPLE [1]\n"
            "  --checked-unguarded      with --sample: keep a header and canary on the\n"
            "                           unguarded blocks (slower)  HEAPKIT_GUARD_PLAIN=0\n"
            "  --max-guarded N          cap on live guarded blocks HEAPKIT_GUARD_MAX_GUARDED\n"
            "                           [(vm.max_map_count - 8192) / 2]\n"
            "  --leaks | --no-leaks     leak report at exit        HEAPKIT_GUARD_LEAKS [1]\n"
            "  --leaks-all              report every block still live at exit (not only\n"
            "                           unreachable ones)          HEAPKIT_GUARD_LEAKS=all\n"
            "  --log FILE               reports to FILE (%%p: pid)  HEAPKIT_GUARD_LOG [stderr]\n"
            "  --frames N               stack frames per trace     HEAPKIT_GUARD_FRAMES [16]\n"
            "  --exact-stacks           unwind every allocation/free stack with the DWARF\n"
            "                           unwinder (slower)          HEAPKIT_GUARD_EXACT_STACKS=1\n"
            "  --no-abort               keep running after a misuse report; exit status\n"
            "                           set at exit                HEAPKIT_GUARD_ABORT=0\n"
            "  --exitcode N             exit status after reports  HEAPKIT_GUARD_EXITCODE [23]\n"
            "  --no-lines               no file:line (skip addr2line) HEAPKIT_GUARD_SYMBOLIZE=0\n"
            "  --no-fill                no fill patterns           HEAPKIT_GUARD_FILL=0\n"
            "  --discard-freed          give freed pages back at once (less memory,\n"
            "                           slower)                    HEAPKIT_GUARD_DISCARD=1\n"
            "  --reserve BYTES          address space for slots    HEAPKIT_GUARD_RESERVE [64g]\n"
            "  --lib PATH               the preload library to use HEAPKIT_GUARD_LIB\n"
            "  -h, --help               this text\n"
            "\n"
            "Fill patterns: fresh memory 0xcd, freed 0xdd, padding 0xfd.\n");
}

/* Finds libheapkit-guard.so: $HEAPKIT_GUARD_LIB, next to this program, in
 * ../lib, in the install libdir. */
static int find_guard_lib(char *out, size_t n) {
    const char *env = getenv("HEAPKIT_GUARD_LIB");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return access(out, R_OK) == 0;
    }
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        static const char *const rel[] = {"libheapkit-guard.so", "../lib/libheapkit-guard.so",
                                          "../lib64/libheapkit-guard.so"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            if (strlen(self) + strlen(rel[i]) + 2 > n) continue;
            memcpy(out, self, strlen(self));
            out[strlen(self)] = '/';
            memcpy(out + strlen(self) + 1, rel[i], strlen(rel[i]) + 1);
            if (access(out, R_OK) == 0) return 1;
        }
    }
    snprintf(out, n, "%s/libheapkit-guard.so", HEAPKIT_INSTALL_LIBDIR);
    return access(out, R_OK) == 0;
}

static int need_arg(int i, int argc, char **argv) {
    if (i + 1 >= argc) {
        fprintf(stderr, "heapkit guard: %s needs a value\n", argv[i]);
        return 0;
    }
    return 1;
}

static int is_number(const char *s) {
    if (!s || !*s) return 0;
    while (*s >= '0' && *s <= '9') s++;
    return *s == 0 ||
           ((*s == 'k' || *s == 'K' || *s == 'm' || *s == 'M' || *s == 'g' || *s == 'G') && s[1] == 0);
}

static int cmd_guard(int argc, char **argv) {
    char lib[PATH_MAX];
    const char *lib_opt = NULL;
    int i = 1;
    /* option -> variable, for the options that take a numeric value */
    static const struct {
        const char *opt, *var;
    } numeric[] = {
        {"--align", "HEAPKIT_GUARD_ALIGN"},
        {"--quarantine", "HEAPKIT_GUARD_QUARANTINE"},
        {"--quarantine-blocks", "HEAPKIT_GUARD_QUARANTINE_BLOCKS"},
        {"--sample", "HEAPKIT_GUARD_SAMPLE"},
        {"--max-guarded", "HEAPKIT_GUARD_MAX_GUARDED"},
        {"--frames", "HEAPKIT_GUARD_FRAMES"},
        {"--exitcode", "HEAPKIT_GUARD_EXITCODE"},
        {"--reserve", "HEAPKIT_GUARD_RESERVE"},
    };
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-') break; /* the program (the `--` is optional) */
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help_guard(stdout);
            return 0;
        }
        int done = 0;
        for (size_t k = 0; k < sizeof numeric / sizeof numeric[0]; k++) {
            if (strcmp(a, numeric[k].opt) == 0) {
                if (!need_arg(i, argc, argv)) return 2;
                if (!is_number(argv[i + 1])) {
                    fprintf(stderr, "heapkit guard: %s wants a number, not '%s'\n", a, argv[i + 1]);
                    return 2;
                }
                setenv(numeric[k].var, argv[++i], 1);
                done = 1;
                break;
            }
        }
        if (done) continue;
        if (strcmp(a, "--side") == 0) {
            if (!need_arg(i, argc, argv)) return 2;
            const char *v = argv[++i];
            if (strcmp(v, "end") != 0 && strcmp(v, "start") != 0 && strcmp(v, "random") != 0) {
                fprintf(stderr, "heapkit guard: --side wants end, start or random, not '%s'\n", v);
                return 2;
            }
            setenv("HEAPKIT_GUARD_SIDE", v, 1);
        } else if (strcmp(a, "--exact") == 0) {
            setenv("HEAPKIT_GUARD_ALIGN", "1", 1);
        } else if (strcmp(a, "--leaks") == 0) {
            setenv("HEAPKIT_GUARD_LEAKS", "1", 1);
        } else if (strcmp(a, "--no-leaks") == 0) {
            setenv("HEAPKIT_GUARD_LEAKS", "0", 1);
        } else if (strcmp(a, "--leaks-all") == 0) {
            setenv("HEAPKIT_GUARD_LEAKS", "all", 1);
        } else if (strcmp(a, "--log") == 0) {
            if (!need_arg(i, argc, argv)) return 2;
            setenv("HEAPKIT_GUARD_LOG", argv[++i], 1);
        } else if (strcmp(a, "--no-abort") == 0) {
            setenv("HEAPKIT_GUARD_ABORT", "0", 1);
        } else if (strcmp(a, "--no-lines") == 0) {
            setenv("HEAPKIT_GUARD_SYMBOLIZE", "0", 1);
        } else if (strcmp(a, "--discard-freed") == 0) {
            setenv("HEAPKIT_GUARD_DISCARD", "1", 1);
        } else if (strcmp(a, "--exact-stacks") == 0) {
            setenv("HEAPKIT_GUARD_EXACT_STACKS", "1", 1);
        } else if (strcmp(a, "--checked-unguarded") == 0) {
            setenv("HEAPKIT_GUARD_PLAIN", "0", 1);
        } else if (strcmp(a, "--no-fill") == 0) {
            setenv("HEAPKIT_GUARD_FILL", "0", 1);
        } else if (strcmp(a, "--lib") == 0) {
            if (!need_arg(i, argc, argv)) return 2;
            lib_opt = argv[++i];
        } else {
            fprintf(stderr, "heapkit guard: unknown option '%s' (heapkit guard --help)\n", a);
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "heapkit guard: no program given\n");
        help_guard(stderr);
        return 2;
    }
    if (lib_opt) {
        snprintf(lib, sizeof lib, "%s", lib_opt);
        if (access(lib, R_OK) != 0) {
            fprintf(stderr, "heapkit guard: cannot read %s: %s\n", lib, strerror(errno));
            return 2;
        }
    } else if (!find_guard_lib(lib, sizeof lib)) {
        fprintf(stderr,
                "heapkit guard: libheapkit-guard.so not found (set HEAPKIT_GUARD_LIB or use --lib)\n");
        return 2;
    }
    /* Keep whatever the user preloads already, after ours. */
    const char *old = getenv("LD_PRELOAD");
    if (old && *old) {
        size_t n = strlen(lib) + strlen(old) + 2;
        char *v = malloc(n);
        if (!v) return 2;
        snprintf(v, n, "%s:%s", lib, old);
        setenv("LD_PRELOAD", v, 1);
        free(v);
    } else {
        setenv("LD_PRELOAD", lib, 1);
    }
    execvp(argv[i], &argv[i]);
    fprintf(stderr, "heapkit guard: cannot run %s: %s\n", argv[i], strerror(errno));
    return 127;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("heapkit %s\n", HEAPKIT_VERSION_STRING);
        return 0;
    }
    const hk_command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "heapkit: unknown command '%s'\n\n", argv[1]);
        usage(stderr);
        return 2;
    }
    return c->main(argc - 1, argv + 1);
}
