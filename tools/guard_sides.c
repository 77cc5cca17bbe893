/*
 * tools/guard_sides.c - `heapkit guard --sides both -- prog args...`: the
 * program run twice on the guard heap, first with the guard page after each
 * block (overflows and over-reads fault), then before it (underflows and
 * under-reads fault), with the same arguments, environment and standard
 * input (read once to its end and replayed from memory), and the union of
 * the two runs' reports, each report once.
 *
 * Invariants: each run's reports go to a log file of its own
 * (HEAPKIT_GUARD_LOG), never mixed with the program's output; the first
 * run's output is the program's, the second run's standard output is
 * discarded (its standard error is kept: the program may say why it died);
 * two reports are the same when their headline kind and their stacks
 * (function and file:line of every frame, addresses left out) are; the
 * status is non-zero when either run reported (the first non-zero status of
 * the runs, else 23) or the first run failed on its own.
 */
#define _GNU_SOURCE 1
#include "guard_sides.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIDES_MAX_REPORTS 256

/* Reads all of fd 0 into an anonymous file; returns its fd (at offset 0),
 * or -1 when stdin is a terminal (nothing to replay) or unreadable. */
static int sides_capture_stdin(void) {
    if (isatty(0)) return -1;
    int fd = memfd_create("heapkit-guard-stdin", MFD_CLOEXEC);
    if (fd < 0) return -1;
    char buf[65536];
    for (;;) {
        ssize_t r = read(0, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        for (ssize_t o = 0; o < r;) {
            ssize_t w = write(fd, buf + o, (size_t)(r - o));
            if (w <= 0) {
                close(fd);
                return -1;
            }
            o += w;
        }
    }
    return fd;
}

/* Runs argv with the preload set by the caller, side `side`, reports to
 * log; stdin from in (rewound) when in >= 0; stdout to /dev/null when
 * quiet. Returns the wait status, or -1. */
static int sides_run(char **argv, const char *side, const char *log, int in, int quiet) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        setenv("HEAPKIT_GUARD_SIDE", side, 1);
        setenv("HEAPKIT_GUARD_LOG", log, 1);
        if (in >= 0) {
            lseek(in, 0, SEEK_SET);
            dup2(in, 0);
        }
        if (quiet) {
            int nul = open("/dev/null", O_WRONLY);
            if (nul >= 0) dup2(nul, 1);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "heapkit guard: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return st;
}

static char *sides_slurp(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap + 1);
    while (b) {
        size_t r = fread(b + len, 1, cap - len, f);
        len += r;
        if (len < cap) break;
        char *nb = realloc(b, cap * 2 + 1);
        if (!nb) break;
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (b) b[len] = 0;
    *n = len;
    return b;
}

typedef struct sides_report {
    const char *text; /* from "==pid== heapkit guard:" to the next one */
    size_t len;
    char key[2048]; /* kind + frames, addresses left out */
} sides_report;

/* The key of a report: the headline up to its first ": " after the
 * prefix (the kind), then each frame line's part from " in " on. */
static void sides_key(const char *t, size_t n, char *key, size_t cap) {
    size_t k = 0;
    const char *end = t + n;
    const char *h = strstr(t, "heapkit guard: ");
    if (h && h < end) {
        h += strlen("heapkit guard: ");
        const char *e = h;
        while (e < end && *e != '\n' && !(e[0] == ':' && e[1] == ' ')) e++;
        /* leak headlines carry their counts: keep the whole line */
        if (strncmp(h, "leak", 4) == 0)
            while (e < end && *e != '\n') e++;
        for (; h < e && k + 1 < cap; h++) key[k++] = *h;
    }
    for (const char *l = t; l < end;) {
        const char *nl = memchr(l, '\n', (size_t)(end - l));
        if (!nl) nl = end;
        const char *in = NULL;
        if (l + 5 < nl && memcmp(l, "    #", 5) == 0) {
            for (const char *q = l; q + 4 <= nl; q++)
                if (memcmp(q, " in ", 4) == 0) {
                    in = q;
                    break;
                }
            if (!in) /* no symbol: "(module+0x...)" */
                for (const char *q = l; q < nl; q++)
                    if (*q == '(') {
                        in = q;
                        break;
                    }
        } else if (l + 2 < nl && l[0] == ' ' && l[1] == ' ' && l[2] != ' ') {
            in = l; /* a label: "  freed at:", "  block ... allocated at:" */
            const char *b = strstr(l, ") allocated at:");
            if (b && b < nl) in = b;
        }
        if (in)
            for (const char *q = in; q < nl && k + 2 < cap; q++) key[k++] = *q;
        if (k + 1 < cap) key[k++] = '|';
        l = nl + 1;
    }
    key[k] = 0;
}

/* Splits a log into reports; returns how many were added to r[*nr...]. */
static int sides_split(const char *log, size_t n, sides_report *r, int *nr) {
    int added = 0;
    const char *p = log, *end = log + n;
    while (p < end && *nr < SIDES_MAX_REPORTS) {
        const char *s = strstr(p, "== heapkit guard: ");
        if (!s) break;
        while (s > p && s[-1] != '\n') s--; /* the line's start: "==pid==" */
        const char *eol = strchr(s, '\n');
        const char *next = eol ? strstr(eol, "== heapkit guard: ") : NULL;
        while (next && next > eol && next[-1] != '\n') next--;
        const char *e = next ? next : end;
        /* "aborting" lines belong to no report of their own */
        const char *h = strstr(s, "heapkit guard: ");
        if (h && strncmp(h + 15, "aborting", 8) != 0) {
            sides_report *x = &r[(*nr)++];
            x->text = s;
            x->len = (size_t)(e - s);
            sides_key(s, x->len, x->key, sizeof x->key);
            added++;
        }
        p = e;
    }
    return added;
}

static int sides_status(int st) {
    if (st < 0) return 125;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 125;
}

int hk_guard_sides_both(char **argv) {
    char dir[] = "/tmp/heapkit-guard-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "heapkit guard: cannot make a temporary directory: %s\n", strerror(errno));
        return 125;
    }
    char log[2][sizeof dir + 16];
    snprintf(log[0], sizeof log[0], "%s/trailing.log", dir);
    snprintf(log[1], sizeof log[1], "%s/leading.log", dir);
    int in = sides_capture_stdin();
    int st[2];
    st[0] = sides_run(argv, "end", log[0], in, 0);
    st[1] = sides_run(argv, "start", log[1], in, 1);
    if (in >= 0) close(in);

    static sides_report reps[SIDES_MAX_REPORTS];
    int nr = 0, got[2] = {0, 0};
    char *text[2];
    for (int k = 0; k < 2; k++) {
        size_t n;
        text[k] = sides_slurp(log[k], &n);
        if (text[k]) got[k] = sides_split(text[k], n, reps, &nr);
        unlink(log[k]);
    }
    rmdir(dir);
    int shown = 0;
    for (int i = 0; i < nr; i++) {
        int dup = 0;
        for (int j = 0; j < i && !dup; j++) dup = strcmp(reps[i].key, reps[j].key) == 0;
        if (dup) continue;
        fwrite(reps[i].text, 1, reps[i].len, stderr);
        shown++;
    }
    fprintf(stderr,
            "heapkit guard: --sides both: %d report%s (trailing guard: %d, leading guard: %d, each shown once)\n",
            shown, shown == 1 ? "" : "s", got[0], got[1]);
    free(text[0]);
    free(text[1]);
    int rc0 = sides_status(st[0]), rc1 = sides_status(st[1]);
    if (got[0] || got[1]) return rc0 ? rc0 : rc1 ? rc1 : 23;
    return rc0;
}
