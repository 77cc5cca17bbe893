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
 *   heapkit env
 *       lists the environment variables the preload libraries read.
 *
 * Options are not declared here: shim/options.h holds every variable (type,
 * default, help) and every flag that sets one; the help text, the parsing
 * and the checks below are generated from those tables.
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
#include "guard_sides.h"
#include "options.h"

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
static int cmd_env(int argc, char **argv);
static void help_env(FILE *out);

static const hk_command k_commands[] = {
    {"guard", "run a program on the page-protected guard heap (overflows, use after free, leaks)", help_guard,
     cmd_guard},
    {"record", "record every allocation of a program into a trace", hk_cmd_record_help, hk_cmd_record},
    {"replay", "replay a trace on zone, glibc, mimalloc, jemalloc, tcmalloc side by side", hk_cmd_replay_help,
     hk_cmd_replay},
    {"report", "an HTML page of a trace: live bytes, top sites, histograms, leaks, heap map",
     hk_cmd_report_help, hk_cmd_report},
    {"map", "an SVG heap map of a trace replayed on a zone, at its peak or any moment", hk_cmd_map_help,
     hk_cmd_map},
    {"stats", "run a program on libheapkit-malloc.so: zone statistics and a size histogram",
     hk_cmd_stats_help, hk_cmd_stats},
    {"env", "list the environment variables the preload libraries read", help_env, cmd_env},
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

/* ---- options (shim/options.h) ------------------------------------------------ */

/* Prints `text` wrapped to `width` columns, every line after the first
 * indented by `indent`; the first starts at column `col`. */
static void print_wrapped(FILE *out, const char *text, int col, int indent, int width) {
    const char *s = text;
    while (*s) {
        int room = width - col;
        int n = (int)strlen(s);
        if (n > room) {
            int cut = room;
            while (cut > 0 && s[cut] != ' ') cut--;
            if (cut == 0) cut = room;
            n = cut;
        }
        fprintf(out, "%.*s", n, s);
        s += n;
        while (*s == ' ') s++;
        if (*s) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        }
    }
    fputc('\n', out);
}

static const char *opt_metavar(const hk_option *o) {
    switch (o->type) {
    case HK_OPT_BYTES: return "BYTES";
    case HK_OPT_COUNT: return "N";
    case HK_OPT_PATH: return "FILE";
    case HK_OPT_CHOICE: return o->choices;
    case HK_OPT_BOOL: return "0|1";
    }
    return "VALUE";
}

/* "VAR [default]" or "VAR=value" for a flag. */
static void flag_effect(const hk_flag *f, char *buf, size_t n) {
    const hk_option *o = &hk_options[f->option];
    const char *d = o->shown ? o->shown : o->dflt;
    if (f->value)
        snprintf(buf, n, "%s=%s", o->var, f->value);
    else if (d)
        snprintf(buf, n, "%s [%s]", o->var, d);
    else
        snprintf(buf, n, "%s", o->var);
}

/* ---- guard --------------------------------------------------------------------- */

static void help_guard(FILE *out) {
    fprintf(out, "usage: heapkit guard [options] -- program [args...]\n"
                 "\n"
                 "Runs the program with every malloc on its own pages between inaccessible\n"
                 "guard pages (libheapkit-guard.so via LD_PRELOAD). Overflows, underflows and\n"
                 "uses after free fault at the access and are reported with the faulting,\n"
                 "allocation and free stacks; double and invalid frees are reported too; live\n"
                 "unreachable blocks are reported at exit. After any report the process exits\n"
                 "non-zero (aborts at the first fault/misuse; status 23 for leaks or with\n"
                 "--no-abort).\n"
                 "\n"
                 "options (each sets the environment variable shown, [default]):\n");
    for (size_t i = 0; i < HK_NFLAGS; i++) {
        const hk_flag *f = &hk_flags[i];
        const hk_option *o = &hk_options[f->option];
        char head[64], effect[96];
        if (f->value)
            snprintf(head, sizeof head, "  %s", f->flag);
        else
            snprintf(head, sizeof head, "  %s %s", f->flag, opt_metavar(o));
        flag_effect(f, effect, sizeof effect);
        fprintf(out, "%-30s", head);
        print_wrapped(out, f->help ? f->help : o->help, 30, 30, 80);
        fprintf(out, "%30s%s\n", "", effect);
    }
    fprintf(out, "%-30s", "  --sides both");
    print_wrapped(out,
                  "run the program twice, guard page after and before each block, with the same "
                  "arguments, environment and standard input (replayed), and report the union: "
                  "under-reads too. The default when no --side or --sample is given (then "
                  "quietly: no summary line, the second run's output discarded). The runs go side "
                  "by side when the second can be isolated (its writes to the working directory "
                  "and /tmp land in an overlay, other mounts are read-only, it has no network); "
                  "by default, a second run that cannot be isolated is not run (one note says so); "
                  "when standard input is a terminal, the second run reads /dev/null",
                  30, 30, 80);
    fprintf(out, "%-30s", "  --sides trailing|leading");
    print_wrapped(out,
                  "one run, guard page after (--side end) or before (--side start) each block: for "
                  "programs whose effects must happen once",
                  30, 30, 80);
    fprintf(out, "%-30s%s\n", "  -h, --help", "this text");
    fprintf(out, "\nFill patterns: fresh memory 0xcd, freed 0xdd, padding 0xfd.\n"
                 "`heapkit env` lists every variable, with the ones no flag sets.\n");
}

/* ---- env ----------------------------------------------------------------------------- */

static void help_env(FILE *out) {
    fprintf(out, "usage: heapkit env\n\nLists the environment variables heapkit's preload libraries and\n"
                 "tool read: name, library, [default], what it does, and its value here\n"
                 "when set.\n");
}

static int cmd_env(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        help_env(stdout);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "heapkit env: no arguments expected\n");
        return 2;
    }
    static const char *const libs[][2] = {{"guard", "libheapkit-guard.so (heapkit guard)"},
                                          {"malloc", "the zone's malloc replacement (LD_PRELOAD)"},
                                          {"record", "libheapkit-record.so (heapkit record)"},
                                          {"tool", "the heapkit command"}};
    for (size_t l = 0; l < sizeof libs / sizeof libs[0]; l++) {
        printf("%s%s:\n", l ? "\n" : "", libs[l][1]);
        for (size_t i = 0; i < HK_NOPTIONS; i++) {
            const hk_option *o = &hk_options[i];
            if (strcmp(o->library, libs[l][0]) != 0) continue;
            const char *d = o->shown ? o->shown : o->dflt;
            char head[96];
            snprintf(head, sizeof head, "  %s=%s", o->var, opt_metavar(o));
            printf("%-44s", head);
            if (d) printf("[%s] ", d);
            print_wrapped(stdout, o->help, 44 + (d ? (int)strlen(d) + 3 : 0), 44, 100);
            const char *v = getenv(o->var);
            if (v)
                printf("%44sset here: %s%s\n", "", v,
                       hk_opt_valid((hk_opt_id)i, v) ? "" : " (not valid: ignored)");
        }
    }
    return 0;
}

/* Finds libheapkit-guard.so: $HEAPKIT_GUARD_LIB, next to this program, in
 * ../lib, in the install libdir. */
static int find_guard_lib(char *out, size_t n) {
    const char *env = getenv(hk_options[HK_OPT_GUARD_LIB].var);
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

static int cmd_guard(int argc, char **argv) {
    char lib[PATH_MAX];
    const char *lib_opt = NULL;
    int sides_both = 0, one_side = 0;
    int i = 1;
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
        if (strcmp(a, "--sides") == 0) {
            const char *v = i + 1 < argc ? argv[++i] : "";
            if (strcmp(v, "both") == 0) {
                sides_both = 1;
            } else if (strcmp(v, "trailing") == 0 || strcmp(v, "leading") == 0) {
                setenv(hk_options[HK_OPT_GUARD_SIDE].var, v[0] == 't' ? "end" : "start", 1);
                one_side = 1;
            } else {
                fprintf(stderr, "heapkit guard: --sides wants both|trailing|leading, not '%s'\n", v);
                return 2;
            }
            continue;
        }
        const hk_flag *f = NULL;
        for (size_t k = 0; k < HK_NFLAGS && !f; k++)
            if (strcmp(a, hk_flags[k].flag) == 0) f = &hk_flags[k];
        if (!f) {
            fprintf(stderr, "heapkit guard: unknown option '%s' (heapkit guard --help)\n", a);
            return 2;
        }
        const hk_option *o = &hk_options[f->option];
        const char *v = f->value;
        if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, "heapkit guard: %s needs a value (%s)\n", a, opt_metavar(o));
                return 2;
            }
            v = argv[++i];
            if (!hk_opt_valid(f->option, v)) {
                fprintf(stderr, "heapkit guard: %s wants %s, not '%s'\n", a, opt_metavar(o), v);
                return 2;
            }
        }
        if (f->option == HK_OPT_GUARD_LIB)
            lib_opt = v; /* the tool's own, not the program's */
        else
            setenv(o->var, v, 1);
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
    if (sides_both) return hk_guard_sides_both(&argv[i], 0);
    /* The default: both sides (two runs), unless a side or sampling was
     * chosen (options or environment). With standard input a terminal the
     * second run reads /dev/null, and runs only when it can be isolated. */
    const char *side = getenv(hk_options[HK_OPT_GUARD_SIDE].var);
    const char *sample = getenv(hk_options[HK_OPT_GUARD_SAMPLE].var);
    if (!one_side && !(side && *side) && !(sample && *sample && strcmp(sample, "1") != 0))
        return hk_guard_sides_both(&argv[i], 1);
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
