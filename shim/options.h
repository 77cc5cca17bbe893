/*
 * shim/options.h - every option of heapkit's preload libraries, declared
 * once: its environment variable, type, default and help text, and the
 * `heapkit` command-line flags that set it. The preload libraries read the
 * variables through this table (hk_opt_get and friends), and `heapkit
 * guard --help` and `heapkit env` print it, so a new option is one row in
 * HK_OPTIONS (plus one in HK_FLAGS when it gets a flag) and nothing else.
 *
 * Header-only (static tables and inline helpers), with no dependency on
 * the library: the tool includes it without linking heapkit. The helpers
 * call getenv and nothing that allocates.
 */
#ifndef HEAPKIT_SHIM_OPTIONS_H
#define HEAPKIT_SHIM_OPTIONS_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum hk_opt_type {
    HK_OPT_BOOL,   /* 0 or 1 */
    HK_OPT_COUNT,  /* a number (k/m/g suffixes allowed) */
    HK_OPT_BYTES,  /* a byte count with k/m/g suffixes */
    HK_OPT_CHOICE, /* one of the words in `choices` */
    HK_OPT_PATH    /* a file name */
} hk_opt_type;

/* X(id, library, variable, type, default, choices, shown default, help)
 *   library  which preload library reads it: "guard" (libheapkit-guard.so),
 *            "malloc" (the zone's malloc replacement), "record"
 *            (libheapkit-record.so) or "tool" (heapkit)
 *   default  the value used when the variable is unset or unreadable, in
 *            the variable's own syntax (NULL: unset means "none")
 *   shown    the default as help shows it, when not the default itself */
#define HK_OPTIONS(X)                                                                                        \
    X(GUARD_SIDE, "guard", "HEAPKIT_GUARD_SIDE", HK_OPT_CHOICE, "end", "end|start|random", NULL,             \
      "block placed against the trailing guard (overruns fault at once), the leading one (underruns), "      \
      "or either at random")                                                                                 \
    X(GUARD_ALIGN, "guard", "HEAPKIT_GUARD_ALIGN", HK_OPT_COUNT, "16", NULL, NULL,                           \
      "most alignment a block gets (a block of n bytes: the largest power of two dividing n, at most "       \
      "this); 1 = exact mode, every overrun faults at once")                                                 \
    X(GUARD_ALIGN_MIN, "guard", "HEAPKIT_GUARD_ALIGN_MIN", HK_OPT_COUNT, "2", NULL, NULL,                    \
      "least alignment a block gets (2: python3 and runtimes that tag the low pointer bit run; 1: a read "   \
      "of the byte after an odd-sized block faults too; 16: glibc's)")                                       \
    X(GUARD_QUARANTINE, "guard", "HEAPKIT_GUARD_QUARANTINE", HK_OPT_BYTES, "8m", NULL, NULL,                 \
      "freed bytes kept inaccessible (0: none)")                                                             \
    X(GUARD_QUARANTINE_BLOCKS, "guard", "HEAPKIT_GUARD_QUARANTINE_BLOCKS", HK_OPT_COUNT, "8192", NULL, NULL, \
      "freed blocks kept inaccessible")                                                                      \
    X(GUARD_SAMPLE, "guard", "HEAPKIT_GUARD_SAMPLE", HK_OPT_COUNT, "1", NULL, NULL,                          \
      "guard one allocation in N on average, the rest on glibc (production runs)")                           \
    X(GUARD_PLAIN, "guard", "HEAPKIT_GUARD_PLAIN", HK_OPT_BOOL, "1", NULL, NULL,                             \
      "with sampling: unguarded blocks are glibc's own, no header or canary (0: keep them, slower)")         \
    X(GUARD_MAX_GUARDED, "guard", "HEAPKIT_GUARD_MAX_GUARDED", HK_OPT_COUNT, "0", NULL,                      \
      "(vm.max_map_count - 8192) / 2", "cap on live guarded blocks")                                         \
    X(GUARD_LEAKS, "guard", "HEAPKIT_GUARD_LEAKS", HK_OPT_CHOICE, "1", "0|1|all", NULL,                      \
      "leak report at exit: off, unreachable blocks, every block still live")                                \
    X(GUARD_LOG, "guard", "HEAPKIT_GUARD_LOG", HK_OPT_PATH, NULL, NULL, "stderr",                            \
      "reports to this file (%p: the process id)")                                                           \
    X(GUARD_FRAMES, "guard", "HEAPKIT_GUARD_FRAMES", HK_OPT_COUNT, "16", NULL, NULL,                         \
      "stack frames kept per trace (up to 32)")                                                              \
    X(GUARD_EXACT_STACKS, "guard", "HEAPKIT_GUARD_EXACT_STACKS", HK_OPT_BOOL, "0", NULL, NULL,               \
      "unwind every allocation/free stack with the DWARF unwinder (slower)")                                 \
    X(GUARD_ABORT, "guard", "HEAPKIT_GUARD_ABORT", HK_OPT_BOOL, "1", NULL, NULL,                             \
      "abort at the first fault or misuse report (0: keep running; exit status set at exit)")                \
    X(GUARD_EXITCODE, "guard", "HEAPKIT_GUARD_EXITCODE", HK_OPT_COUNT, "23", NULL, NULL,                     \
      "exit status after reports")                                                                           \
    X(GUARD_SYMBOLIZE, "guard", "HEAPKIT_GUARD_SYMBOLIZE", HK_OPT_BOOL, "1", NULL, NULL,                     \
      "file:line in stacks (runs addr2line)")                                                                \
    X(GUARD_FILL, "guard", "HEAPKIT_GUARD_FILL", HK_OPT_BOOL, "1", NULL, NULL,                               \
      "fill patterns: fresh memory 0xcd, freed 0xdd, padding 0xfd")                                          \
    X(GUARD_DISCARD, "guard", "HEAPKIT_GUARD_DISCARD", HK_OPT_BOOL, "0", NULL, NULL,                         \
      "give freed pages back to the OS at once (less memory, slower)")                                       \
    X(GUARD_FAST_REUSE, "guard", "HEAPKIT_GUARD_FAST_REUSE", HK_OPT_BOOL, "0", NULL, NULL,                   \
      "freed blocks stay accessible and are reused at once, padding unchecked (heapkit guard's second "      \
      "run, which only looks before blocks)")                                                                \
    X(GUARD_RESERVE, "guard", "HEAPKIT_GUARD_RESERVE", HK_OPT_BYTES, "64g", NULL, NULL,                      \
      "address space for guarded slots")                                                                     \
    X(GUARD_ISOLATE, "tool", "HEAPKIT_GUARD_ISOLATE", HK_OPT_BOOL, "1", NULL, NULL,                          \
      "isolate heapkit guard's second run (0: as if isolation were unavailable: by default one run and a "   \
      "note, with --sides both the second run unisolated)")                                                  \
    X(GUARD_FORK, "tool", "HEAPKIT_GUARD_FORK", HK_OPT_BOOL, "1", NULL, NULL,                                \
      "fork heapkit guard's second run from the first run's start (0: start the program a second time)")     \
    X(GUARD_TWIN, "guard", "HEAPKIT_GUARD_TWIN", HK_OPT_PATH, NULL, NULL, "none",                            \
      "set by heapkit guard for the first run: fork the second run at start (spent at once)")                \
    X(GUARD_LIB, "tool", "HEAPKIT_GUARD_LIB", HK_OPT_PATH, NULL, NULL, "found next to heapkit",              \
      "the guard preload library `heapkit guard` uses")                                                      \
    X(MALLOC_QUIET, "malloc", "HEAPKIT_QUIET", HK_OPT_BOOL, "0", NULL, NULL,                                 \
      "silence misuse reports (a free of a pointer the zone never returned, a double free)")                 \
    X(MALLOC_STATS, "malloc", "HEAPKIT_STATS", HK_OPT_BOOL, "0", NULL, NULL,                                 \
      "print the zone's statistics to stderr at exit")                                                       \
    X(MALLOC_DECAY_MS, "malloc", "HEAPKIT_DECAY_MS", HK_OPT_COUNT, "500", NULL, NULL,                        \
      "free memory that stays free this many milliseconds goes back to the OS (0: only on malloc_trim)")     \
    X(MALLOC_FAIL_AFTER, "malloc", "HEAPKIT_FAIL_AFTER", HK_OPT_COUNT, "0", NULL, "off",                     \
      "testing: the N-th page acquisition from the OS fails as if memory ran out (malloc then returns "      \
      "NULL with errno ENOMEM)")                                                                             \
    X(MALLOC_FAIL_PERSIST, "malloc", "HEAPKIT_FAIL_PERSIST", HK_OPT_BOOL, "0", NULL, NULL,                   \
      "testing: with HEAPKIT_FAIL_AFTER, every acquisition from the N-th on fails, not only that one")       \
    X(RECORD_OUT, "record", "HEAPKIT_RECORD_OUT", HK_OPT_PATH, NULL, NULL, "heapkit.<pid>.hkt",              \
      "the trace file libheapkit-record.so writes")                                                          \
    X(RECORD_PID, "record", "HEAPKIT_RECORD_PID", HK_OPT_COUNT, NULL, NULL, "none",                          \
      "the process that writes the trace itself; any other (a program it runs, a forked child) writes "      \
      "<trace>.<pid> (unset: the first process to lock the trace file writes it)")                           \
    X(RECORD_CHILDREN, "record", "HEAPKIT_RECORD_CHILDREN", HK_OPT_BOOL, "1", NULL, NULL,                    \
      "other processes record too (0: only the HEAPKIT_RECORD_PID process)")                                 \
    X(RECORD_FRAMES, "record", "HEAPKIT_RECORD_FRAMES", HK_OPT_COUNT, "24", NULL, NULL,                      \
      "stack frames kept per allocation (0..64)")                                                            \
    X(RECORD_LIB, "tool", "HEAPKIT_RECORD_LIB", HK_OPT_PATH, NULL, NULL, "found next to heapkit",            \
      "the preload library `heapkit record` uses")                                                           \
    X(MALLOC_LIB, "tool", "HEAPKIT_MALLOC_LIB", HK_OPT_PATH, NULL, NULL, "found next to heapkit",            \
      "the zone's malloc replacement `heapkit stats` uses")                                                  \
    X(STATS_LIB, "tool", "HEAPKIT_STATS_LIB", HK_OPT_PATH, NULL, NULL, "found next to heapkit",              \
      "the size-histogram preload `heapkit stats` puts in front of it")

/* F(flag, option id, value, help)
 *   value  what the flag sets the variable to; NULL: the flag takes the
 *          value as its next argument (checked against the option's type)
 *   help   NULL: the option's own help */
#define HK_FLAGS(F)                                                                                          \
    F("--side", GUARD_SIDE, NULL, NULL)                                                                      \
    F("--align", GUARD_ALIGN, NULL, "most alignment a block gets")                                           \
    F("--exact", GUARD_ALIGN, "1", "alignment 1: every overrun faults at once")                              \
    F("--align-min", GUARD_ALIGN_MIN, NULL, NULL)                                                            \
    F("--align-all", GUARD_ALIGN_MIN, "16", "every block 16-aligned, as glibc (--align-min 16)")             \
    F("--quarantine", GUARD_QUARANTINE, NULL, NULL)                                                          \
    F("--quarantine-blocks", GUARD_QUARANTINE_BLOCKS, NULL, NULL)                                            \
    F("--sample", GUARD_SAMPLE, NULL, NULL)                                                                  \
    F("--checked-unguarded", GUARD_PLAIN, "0",                                                               \
      "with --sample: keep a header and canary on the unguarded blocks (slower)")                            \
    F("--max-guarded", GUARD_MAX_GUARDED, NULL, NULL)                                                        \
    F("--leaks", GUARD_LEAKS, "1", "leak report at exit: unreachable blocks")                                \
    F("--no-leaks", GUARD_LEAKS, "0", "no leak report")                                                      \
    F("--leaks-all", GUARD_LEAKS, "all", "report every block still live at exit, reachable or not")          \
    F("--log", GUARD_LOG, NULL, NULL)                                                                        \
    F("--frames", GUARD_FRAMES, NULL, NULL)                                                                  \
    F("--exact-stacks", GUARD_EXACT_STACKS, "1", NULL)                                                       \
    F("--no-abort", GUARD_ABORT, "0", "keep running after a misuse report; exit status set at exit")         \
    F("--exitcode", GUARD_EXITCODE, NULL, NULL)                                                              \
    F("--no-lines", GUARD_SYMBOLIZE, "0", "no file:line in stacks (skip addr2line)")                         \
    F("--no-fill", GUARD_FILL, "0", "no fill patterns")                                                      \
    F("--discard-freed", GUARD_DISCARD, "1", NULL)                                                           \
    F("--reserve", GUARD_RESERVE, NULL, NULL)                                                                \
    F("--no-isolate", GUARD_ISOLATE, "0", "as if the second run could not be isolated (tests)")              \
    F("--lib", GUARD_LIB, NULL, NULL)

typedef enum hk_opt_id {
#define HK_OPT_ENUM_(id, lib, var, type, dflt, choices, shown, help) HK_OPT_##id,
    HK_OPTIONS(HK_OPT_ENUM_)
#undef HK_OPT_ENUM_
        HK_OPT_COUNT_
} hk_opt_id;

typedef struct hk_option {
    const char *library, *var;
    hk_opt_type type;
    const char *dflt, *choices, *shown, *help;
} hk_option;

typedef struct hk_flag {
    const char *flag;
    hk_opt_id option;
    const char *value, *help;
} hk_flag;

static const hk_option hk_options[] = {
#define HK_OPT_ROW_(id, lib, var, type, dflt, choices, shown, help)                                          \
    {lib, var, type, dflt, choices, shown, help},
    HK_OPTIONS(HK_OPT_ROW_)
#undef HK_OPT_ROW_
};

static const hk_flag hk_flags[] = {
#define HK_FLAG_ROW_(flag, id, value, help) {flag, HK_OPT_##id, value, help},
    HK_FLAGS(HK_FLAG_ROW_)
#undef HK_FLAG_ROW_
};

#define HK_NOPTIONS (sizeof hk_options / sizeof hk_options[0])
#define HK_NFLAGS   (sizeof hk_flags / sizeof hk_flags[0])

/* Parses a number with an optional k/m/g suffix (powers of 1024). Returns
 * 1 and stores it when s is one, else 0. */
static inline int hk_opt_parse_number(const char *s, size_t *out) {
    size_t n = 0;
    const char *p = s;
    if (!s) return 0;
    while (*p >= '0' && *p <= '9') n = n * 10 + (size_t)(*p++ - '0');
    if (p == s) return 0;
    switch (*p) {
    case 'k':
    case 'K': n <<= 10, p++; break;
    case 'm':
    case 'M': n <<= 20, p++; break;
    case 'g':
    case 'G': n <<= 30, p++; break;
    default: break;
    }
    if (*p) return 0;
    *out = n;
    return 1;
}

/* True when value is one of the '|'-separated words of choices. */
static inline int hk_opt_is_choice(const char *choices, const char *value) {
    size_t n = strlen(value);
    for (const char *c = choices; c && *c;) {
        const char *e = strchr(c, '|');
        size_t k = e ? (size_t)(e - c) : strlen(c);
        if (k == n && strncmp(c, value, n) == 0) return 1;
        c = e ? e + 1 : NULL;
    }
    return 0;
}

/* True when value is valid for the option. */
static inline int hk_opt_valid(hk_opt_id id, const char *value) {
    const hk_option *o = &hk_options[id];
    size_t n;
    switch (o->type) {
    case HK_OPT_BOOL: return strcmp(value, "0") == 0 || strcmp(value, "1") == 0;
    case HK_OPT_COUNT:
    case HK_OPT_BYTES: return hk_opt_parse_number(value, &n);
    case HK_OPT_CHOICE: return hk_opt_is_choice(o->choices, value);
    case HK_OPT_PATH: return value[0] != 0;
    }
    return 0;
}

/* The option's value: its variable when set and valid, else its default
 * (NULL when it has none). */
static inline const char *hk_opt_get(hk_opt_id id) {
    const char *v = getenv(hk_options[id].var);
    return v && *v && hk_opt_valid(id, v) ? v : hk_options[id].dflt;
}

/* A BOOL option: false when the variable starts with '0', true when it
 * is set to anything else, the default when unset or empty. */
static inline int hk_opt_bool(hk_opt_id id) {
    const char *v = getenv(hk_options[id].var);
    if (!v || !*v) v = hk_options[id].dflt;
    return v && v[0] != '0';
}

/* True when the variable is set (to anything). */
static inline int hk_opt_is_set(hk_opt_id id) { return getenv(hk_options[id].var) != NULL; }

/* A COUNT or BYTES option: the value, or the default. */
static inline size_t hk_opt_number(hk_opt_id id) {
    size_t n = 0;
    if (!hk_opt_parse_number(hk_opt_get(id), &n)) (void)hk_opt_parse_number(hk_options[id].dflt, &n);
    return n;
}

#endif /* HEAPKIT_SHIM_OPTIONS_H */
