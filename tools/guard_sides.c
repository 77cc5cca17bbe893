/*
 * tools/guard_sides.c - both sides of every block: `heapkit guard -- prog
 * args...` (the default when standard input is not a terminal) and
 * `heapkit guard --sides both`. The program runs twice on the guard heap,
 * once with the guard page after each block (overflows and over-reads
 * fault), once before it (underflows and under-reads fault), with the same
 * arguments, environment and standard input (a file: each run opens it
 * again; a pipe: the tool copies it to both as it comes, keeping what the
 * slower has not read), and the union of the two runs' reports is
 * printed, each report once.
 *
 * The two runs go side by side when the second can be isolated: it runs in
 * a mount namespace of its own (a user namespace too when not root) where
 * the working directory and /tmp are overlays whose upper layers are on a
 * tmpfs of that namespace's own, so its writes there never reach the first
 * run or the user, every other mount is read-only, descriptors past 2 it
 * would inherit are closed, and a seccomp filter keeps it off the network
 * (tools/guard_isolate.c).
 * When that cannot be set up (no namespaces, no overlayfs, no read-only
 * remount, no filter, no /dev/shm, or HEAPKIT_GUARD_ISOLATE=0), the
 * default runs the program once and says so in one line; --sides both
 * then runs the second after the first has ended, unisolated, and says so.
 *
 * Invariants: each run's reports go to a log file of its own
 * (HEAPKIT_GUARD_LOG), never mixed with the program's output, on /dev/shm
 * (outside the overlays); the first run's output is the program's, the
 * union goes where the user's HEAPKIT_GUARD_LOG (--log) says, else to
 * standard error; the second run's standard output is discarded, and so
 * is its standard error by default (kept with --sides both: the program
 * may say why it died); the second run does no leak check and keeps no
 * quarantine (the first does both, on the same program: uses after free
 * and leaks are the first's to report; reusing a freed block's pages at
 * once saves the second run page faults: a quarter of python3's time); two
 * reports are the same when their headline kind and their stacks
 * (function and file:line of every frame, addresses left out) are; the
 * status is non-zero when either run reported (the first non-zero status
 * of the runs, else 23) or the first run failed on its own; a second run
 * still going 10 s (or twice the first run's time, if longer) after the
 * first ended is stopped, and that is said.
 */
#define _GNU_SOURCE 1
#include "guard_sides.h"
#include "guard_isolate.h"
#include "options.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <dirent.h>
#include <ftw.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SIDES_MAX_REPORTS 256

/* Why the second run could not be isolated, for the note. */
static const char *sides_why(char c) {
    switch (c) {
    case 'd': return "HEAPKIT_GUARD_ISOLATE=0";
    case 'n': return "no mount namespace";
    case 'o': return "no overlay filesystem";
    case 'r': return "no read-only remount";
    case 'f': return "no seccomp filter";
    case 'x': return "it did not start";
    default: return "no /dev/shm";
    }
}

static int sides_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)f;
    (void)(flag == FTW_DP ? rmdir(path) : unlink(path)); /* best effort */
    return 0;
}

static int sides_open_up(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)f;
    if (flag == FTW_D || flag == FTW_DNR) chmod(path, (st->st_mode & 07777) | 0700);
    return 0;
}

/* Removes a directory tree (the second run's overlay layers; overlayfs
 * leaves a work directory of mode 0 in them). */
static void sides_rm_tree(const char *dir) {
    nftw(dir, sides_rm_one, 16, FTW_PHYS | FTW_DEPTH);
    if (rmdir(dir) == 0 || errno == ENOENT) return; /* root may remove what mode 0 guards */
    nftw(dir, sides_open_up, 16, FTW_PHYS);
    nftw(dir, sides_rm_one, 16, FTW_PHYS | FTW_DEPTH);
}

typedef struct sides_run_spec {
    const char *side; /* "end" or "start" */
    const char *log;
    int in;          /* standard input: an fd to reopen (a file), to dup (a pipe), -1 (inherited) or
                        -2 (/dev/null) */
    int in_pipe;     /* in is the read end of a pipe the tool feeds: dup2 it as it is */
    int quiet_out;   /* standard output to /dev/null */
    int quiet_err;   /* standard error to /dev/null */
    int second;      /* the second run: no leak check, no quarantine */
    const char *dir; /* isolate in the mount namespace: stage dir/stage, logs in dir (NULL: not) */
    int ready;       /* write end: one byte, 'i' isolated or 's' not (-1: none) */
    int go;          /* read end: wait for EOF before running (-1: run at once) */
    int other[4];    /* the parent's ends of those pipes, closed in the child (-1: none) */
    int detach;      /* a session of its own (no controlling terminal: it cannot open /dev/tty and
                        take the user's keys) and killed if the tool dies */
    int twin_ready;  /* the first run forks the second (shim/guard_twin.c), which says how it went on
                        this write end (-1: no twin) */
    char twin_in;    /* the second run's standard input: 'f' the file again, 'k' the same (a character
                        device: no offset), 'n' /dev/null, 'p' twin_pipe */
    int twin_pipe;   /* the read end of the second run's standard input pipe (twin_in 'p') */
    off_t in_at;     /* a file on standard input: the offset to open it again at (-1: where it is) */
} sides_run_spec;

static sigset_t sides_program_mask; /* the signal mask the programs get (the tool's own) */

/* environ with `set` ("NAME=value" each) in place of the same names'
 * entries (appended when absent); NULL when out of memory. */
static char **sides_env(char **set, size_t nset) {
    size_t n = 0;
    while (environ[n]) n++;
    char **env = malloc((n + nset + 1) * sizeof *env);
    if (!env) return NULL;
    size_t o = 0;
    for (size_t k = 0; k < n; k++) {
        int dup = 0;
        for (size_t j = 0; j < nset && !dup; j++) {
            size_t len = (size_t)(strchr(set[j], '=') - set[j]) + 1;
            dup = strncmp(environ[k], set[j], len) == 0;
        }
        if (!dup) env[o++] = environ[k];
    }
    for (size_t j = 0; j < nset; j++) env[o++] = set[j];
    env[o] = NULL;
    return env;
}

/* The first run when the second forks from it (shim/guard_twin.c), with
 * posix_spawn (no copy of the tool's page tables): HEAPKIT_GUARD_TWIN for
 * the preload (its format there), with the descriptors the program
 * inherits past standard error, and every variable the second run will
 * change set already (so the second run replaces them in place: main's
 * envp then agrees with environ); the socket and pipe the preload gets
 * stay open across exec. Standard input is the tool's own (the second
 * run opens the file again at the offset the first run starts from).
 * Returns the pid, or -1 (the caller then forks: sides_start). */
static pid_t sides_spawn_first(char **argv, const sides_run_spec *sp) {
    char fds[256] = "-";
    size_t o = 0;
    DIR *d = opendir("/proc/self/fd"); /* what the program inherits: ours, but the close-on-exec ones */
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        int fl = fd > 2 && fd != dirfd(d) ? fcntl(fd, F_GETFD) : -1;
        if (fl < 0 || (fl & FD_CLOEXEC) || o + 16 > sizeof fds) continue;
        o += (size_t)snprintf(fds + o, sizeof fds - o, "%s%d", o ? "," : "", fd);
    }
    if (d) closedir(d);
    char in[24] = {sp->twin_in, 0}, twin[PATH_MAX + 512], side[64], log[PATH_MAX + 32], dflt[3][96];
    if (sp->twin_in == 'p') snprintf(in, sizeof in, "p%d", sp->twin_pipe);
    snprintf(twin, sizeof twin, "%s=%d:%s:%ld:%s:%s", hk_options[HK_OPT_GUARD_TWIN].var, sp->twin_ready, in,
             (long)getpid(), fds, sp->dir);
    snprintf(side, sizeof side, "HEAPKIT_GUARD_SIDE=%s", sp->side);
    snprintf(log, sizeof log, "HEAPKIT_GUARD_LOG=%s", sp->log);
    char *set[6] = {twin, side, log};
    size_t nset = 3;
    static const hk_opt_id changed[] = {HK_OPT_GUARD_LEAKS, HK_OPT_GUARD_QUARANTINE, HK_OPT_GUARD_FAST_REUSE};
    for (size_t k = 0; k < 3; k++)
        if (!getenv(hk_options[changed[k]].var)) {
            snprintf(dflt[k], sizeof dflt[k], "%s=%s", hk_options[changed[k]].var, hk_opt_get(changed[k]));
            set[nset++] = dflt[k];
        }
    char **env = sides_env(set, nset);
    if (!env) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    if (sp->in >= 0 && sp->in_pipe) posix_spawn_file_actions_adddup2(&fa, sp->in, 0);
    sigset_t dfl;
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    posix_spawnattr_setsigmask(&at, &sides_program_mask);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int keep[2] = {sp->twin_ready, sp->twin_in == 'p' ? sp->twin_pipe : -1};
    for (int k = 0; k < 2; k++)
        if (keep[k] >= 0) fcntl(keep[k], F_SETFD, 0);
    pid_t pid = -1;
    fflush(NULL);
    if (posix_spawnp(&pid, argv[0], &fa, &at, argv, env) != 0) pid = -1;
    for (int k = 0; k < 2; k++)
        if (keep[k] >= 0) fcntl(keep[k], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    free(env);
    return pid;
}

/* Starts argv with the preload set by the caller as spec says; returns the
 * pid, or -1. No descriptor of ours is left open in the program. */
static pid_t sides_start(char **argv, const sides_run_spec *sp) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    sigprocmask(SIG_SETMASK, &sides_program_mask, NULL);
    if (sp->second) {
        hk__iso_second_env(sp->log); /* its side is "start" */
    } else {
        setenv("HEAPKIT_GUARD_SIDE", sp->side, 1);
        setenv("HEAPKIT_GUARD_LOG", sp->log, 1);
    }
    if (sp->in == -2) {
        int nul0 = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nul0 >= 0) dup2(nul0, 0);
    } else if (sp->in >= 0 && sp->in_pipe) {
        dup2(sp->in, 0);
    } else if (sp->in >= 0) { /* a description of its own: the runs' read offsets must not mix */
        off_t at = sp->in_at >= 0 ? sp->in_at : lseek(sp->in, 0, SEEK_CUR);
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", sp->in);
        int fd = open(self, O_RDONLY | O_CLOEXEC);
        if (fd < 0) fd = sp->in;
        if (at > 0) lseek(fd, at, SEEK_SET);
        if (fd != 0) dup2(fd, 0);
    }
    int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (sp->quiet_out && nul >= 0) dup2(nul, 1);
    if (sp->quiet_err && nul >= 0) dup2(nul, 2);
    signal(SIGPIPE, SIG_DFL);
    if (sp->detach) {
        pid_t parent = getppid();
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(125); /* the tool is gone already */
    }
    for (int k = 0; k < 4; k++)
        if (sp->other[k] >= 0) close(sp->other[k]);
    if (sp->ready >= 0) {
        char stage[PATH_MAX];
        snprintf(stage, sizeof stage, "%s/stage", sp->dir);
        char c = sp->dir ? hk__iso_isolate(sp->dir, stage) : 's';
        /* inherited descriptors past the standard three (a log the caller
         * opened, say) are not the second run's to write to */
        if (c == 'i') hk__iso_cloexec_from(3);
        int32_t rec[2] = {c, (int32_t)getpid()};
        if (write(sp->ready, rec, sizeof rec) != (ssize_t)sizeof rec) _exit(125);
        close(sp->ready);
    }
    if (sp->go >= 0) {
        char c;
        while (read(sp->go, &c, 1) < 0 && errno == EINTR) {
        }
        close(sp->go);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "heapkit guard: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int sides_wait(pid_t pid) {
    int st = 0;
    if (pid < 0) return -1;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return st;
}

static double sides_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Waits for pid at most limit seconds; then kills it. *killed says so.
 * SIGCHLD is blocked by the caller, so sigtimedwait wakes at the child's
 * exit, not at a polling tick. */
static int sides_wait_limited(pid_t pid, double limit, int *killed) {
    *killed = 0;
    if (pid < 0) return -1;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    double end = sides_now() + limit;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        if (r < 0 && errno != EINTR) return -1;
        double left = end - sides_now();
        if (left <= 0) {
            kill(pid, SIGKILL);
            *killed = 1;
            return sides_wait(pid);
        }
        struct timespec d = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        sigtimedwait(&chld, NULL, &d);
    }
}

/* A log's text (NULL when empty or missing: most runs report nothing). */
static char *sides_slurp(const char *path, size_t *n) {
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return NULL;
    char *b = NULL;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && (b = malloc((size_t)st.st_size + 1)) != NULL) {
        size_t len = 0;
        for (ssize_t r; len < (size_t)st.st_size; len += (size_t)r)
            if ((r = read(fd, b + len, (size_t)st.st_size - len)) <= 0) break;
        b[len] = 0;
        *n = len;
    }
    close(fd);
    return b;
}

typedef struct sides_report {
    const char *text; /* from "==pid== heapkit guard:" to the next one */
    size_t len;
    char key[2048];   /* kind + frames, addresses left out */
    char kind[64];    /* the headline's first words: "heap overflow", "use after free", ... */
    char alloc[1024]; /* the frames under "allocated at:" (functions and lines) */
    int run;          /* 0: guard page after each block, 1: before */
    int late;         /* found at free, by check or at exit (not at the access) */
    int dropped;      /* the same bug as a report kept */
} sides_report;

/* kind, alloc and late of a report (see sides_report). */
static void sides_describe(sides_report *x) {
    const char *t = x->text, *end = t + x->len;
    const char *h = strstr(t, "heapkit guard: ");
    size_t k = 0;
    if (h && h < end)
        for (h += 15; h < end && *h != '(' && *h != ':' && *h != '\n' && k + 1 < sizeof x->kind; h++)
            x->kind[k++] = *h;
    while (k && x->kind[k - 1] == ' ') k--;
    x->kind[k] = 0;
    const char *nl = memchr(t, '\n', x->len);
    x->late = nl && memmem(t, (size_t)(nl - t), "found at ", 9) != NULL;
    k = 0;
    const char *a = memmem(t, x->len, "allocated at:\n", 14);
    for (const char *l = a ? a + 14 : end; l < end && l + 5 < end && memcmp(l, "    #", 5) == 0;) {
        const char *e = memchr(l, '\n', (size_t)(end - l));
        if (!e) e = end;
        const char *in = memmem(l, (size_t)(e - l), " in ", 4);
        for (const char *q = in ? in : e; q < e && k + 2 < sizeof x->alloc; q++) x->alloc[k++] = *q;
        if (k + 1 < sizeof x->alloc) x->alloc[k++] = '|';
        l = e + 1;
    }
    x->alloc[k] = 0;
}

/* The key of a report: the headline up to its first ": " after the
 * prefix (the kind), then each frame line's part from " in " on. */
static void sides_key(const char *t, size_t n, char *key, size_t cap) {
    size_t k = 0;
    const char *end = t + n;
    const char *h = strstr(t, "heapkit guard: ");
    if (h && h < end) {
        h += strlen("heapkit guard: ");
        const char *e = h;
        while (e < end && *e != '\n' && !(e[0] == ':' && e[1] == ' ') && strncmp(e, " at 0x", 6) != 0) e++;
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
static int sides_split(const char *log, size_t n, int run, sides_report *r, int *nr) {
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
            x->run = run;
            x->dropped = 0;
            sides_describe(x);
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

/* Prints the log's notes (lines "heapkit guard: ..." outside any report,
 * such as the address-space limit) not already in `seen` (the first log's
 * text, or NULL). */
static void sides_notes(FILE *out, const char *log, const char *seen) {
    for (const char *l = log; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l + 1) : strlen(l);
        if (strncmp(l, "heapkit guard: ", 15) == 0) {
            int dup = 0;
            for (const char *q = seen; q && !dup && (q = strstr(q, "heapkit guard: ")) != NULL; q++)
                dup = (q == seen || q[-1] == '\n') && strncmp(q, l, n) == 0;
            if (!dup) fwrite(l, 1, n, out);
        }
        l += n;
    }
}

/* ---- standard input for two runs side by side -------------------------------------- */

typedef struct sides_feed {
    int fd; /* write end of a run's standard input (-1: closed) */
    char *buf;
    size_t off, len, cap;
} sides_feed;

static void sides_feed_close(sides_feed *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    free(f->buf);
    f->buf = NULL;
    f->off = f->len = f->cap = 0;
}

static void sides_feed_push(sides_feed *f, const char *d, size_t n) {
    if (f->fd < 0) return;
    if (f->off == f->len) f->off = f->len = 0;
    if (f->len + n > f->cap) {
        size_t cap = f->cap ? f->cap : 65536;
        while (cap < f->len + n) cap *= 2;
        char *b = realloc(f->buf, cap);
        if (!b) { /* out of memory: this run loses its input */
            sides_feed_close(f);
            return;
        }
        f->buf = b;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, d, n);
    f->len += n;
}

/* What the tool's loop knows of the runs while they start. */
typedef struct sides_ctl {
    int ready;         /* read end: records (twin_tell's) from the runs; -1 once the verdict is in */
    int go;            /* write end: closed when the second run the tool started may run (-1: none) */
    pid_t p1, p2;      /* p2: -1 until known */
    int *st0, p1_done; /* the first run's status, once it ended inside the loop */
    int skip;          /* by default: a second run that is not isolated is not run */
    int twin;          /* the second run is to fork from the first (its records 'F' or 'T' first) */
    int in2;           /* the tool's copy of the second run's standard input pipe (-1: none) */
    char reply;        /* the verdict: hk__iso_isolate's letter ('s' none yet; 'x' the second run never
                          said) */
    int forked;        /* a twin: the first run said 'F' */
    char **argv;
    sides_run_spec *lead; /* for the second run the tool starts itself */
} sides_ctl;

/* The first run did not fork the second (or never said: the preload was
 * not loaded): the tool starts it, as before the twin existed. */
static void sides_start_lead(sides_ctl *c) {
    int ready[2], go[2];
    c->twin = 0;
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0) {
        c->reply = 'x';
        return;
    }
    c->lead->ready = ready[1];
    c->lead->go = go[0];
    c->lead->other[0] = ready[0];
    c->lead->other[1] = go[1];
    if (c->in2 >= 0) c->lead->in = c->in2;
    c->p2 = sides_start(c->argv, c->lead);
    close(ready[1]);
    close(go[0]);
    if (c->in2 >= 0) close(c->in2);
    c->in2 = -1;
    c->ready = ready[0];
    c->go = go[1];
}

/* A record on c->ready: the first run's word on the fork, or the second
 * run's on its isolation (from a twin, in either order). Returns 1 when
 * the loop must watch the first run's end (the second run waits for it). */
static int sides_heard(sides_ctl *c) {
    int32_t rec[2] = {0, 0};
    ssize_t got = read(c->ready, rec, sizeof rec);
    if (got < 0 && errno == EINTR) return 0;
    char what = got == (ssize_t)sizeof rec ? (char)rec[0] : 0;
    if (c->twin && what) {
        if (what == 'T') { /* it did not fork: the tool starts the second run */
            close(c->ready);
            c->ready = -1;
            sides_start_lead(c);
            return 0;
        }
        if (rec[1] > 0) c->p2 = (pid_t)rec[1];
        if (what != 'F')
            c->reply = what;
        else
            c->forked = 1;
        if (c->in2 >= 0) close(c->in2); /* the second run has its own */
        c->in2 = -1;
        if (c->forked && c->reply != 's') {
            close(c->ready);
            c->ready = -1;
        }
        return 0;
    }
    close(c->ready);
    c->ready = -1;
    if (c->twin) { /* the end, before both records */
        if (c->p2 < 0)
            sides_start_lead(c); /* the first run never said (the preload was not loaded) */
        else if (c->reply == 's')
            c->reply = 'x'; /* forked, but the second run never said */
        return 0;
    }
    c->reply = what ? what : 's';
    if (c->reply == 'i') {
        close(c->go);     /* isolated: it runs now */
    } else if (c->skip) { /* not isolated, by default: no second run */
        kill(c->p2, SIGKILL);
        close(c->go);
    } else {
        return 1;
    }
    return 0;
}

/* The tool's loop while the runs start: copies standard input (a pipe or a
 * socket: not read to its end first, so a producer that never ends or
 * waits for the program's answers works) into each run's pipe as it
 * comes, buffering for the slower one; takes the runs' records
 * (sides_heard: with a second run the tool started, 'i' lets it run now;
 * else, with `skip` 0, it runs when the first run has ended, and with
 * `skip` set it is stopped). Returns when standard input has ended (or no
 * run reads any more) and every pipe is drained and closed. */
static void sides_pump(sides_feed *f, sides_ctl *c) {
    int eof = 0, waiting = 0;
    char buf[65536];
    for (;;) {
        struct pollfd pf[4];
        int n = 0, i_in = -1, i_f[2] = {-1, -1}, i_ready = -1;
        int open_feeds = (f[0].fd >= 0) + (f[1].fd >= 0);
        if (!eof && open_feeds) {
            i_in = n;
            pf[n++] = (struct pollfd){0, POLLIN, 0};
        }
        for (int k = 0; k < 2; k++)
            if (f[k].fd >= 0) {
                i_f[k] = n;
                pf[n++] = (struct pollfd){f[k].fd, (short)(f[k].len > f[k].off ? POLLOUT : 0), 0};
            }
        if (c->ready >= 0) {
            i_ready = n;
            pf[n++] = (struct pollfd){c->ready, POLLIN, 0};
        }
        /* the first run's end is watched while a second run waits for it,
         * and while the first run has not said whether it forked (a
         * program the preload never reached keeps the pipe open) */
        int watch = !c->p1_done && (waiting || (c->twin && c->p2 < 0));
        if (!n && !waiting) break;
        int r = poll(pf, (nfds_t)n, watch ? 5 : -1);
        if (r < 0 && errno != EINTR) break;
        if (watch) {
            pid_t w = waitpid(c->p1, c->st0, WNOHANG);
            if (w == c->p1 || (w < 0 && errno != EINTR)) {
                c->p1_done = 1;
                if (waiting) {
                    waiting = 0;
                    close(c->go); /* not isolated: the second run starts now */
                } else if (c->twin && c->p2 < 0) {
                    struct pollfd q = {c->ready, POLLIN, 0};
                    if (poll(&q, 1, 0) == 0) { /* it ended without a word: the tool starts the second run */
                        close(c->ready);
                        c->ready = -1;
                        sides_start_lead(c);
                        continue;
                    }
                }
            }
        }
        if (r <= 0) continue;
        if (i_ready >= 0 && pf[i_ready].revents && sides_heard(c)) waiting = 1;
        if (i_in >= 0 && pf[i_in].revents) {
            ssize_t got = read(0, buf, sizeof buf);
            if (got > 0)
                for (int k = 0; k < 2; k++) sides_feed_push(&f[k], buf, (size_t)got);
            else if (got == 0 || errno != EINTR)
                eof = 1;
        }
        for (int k = 0; k < 2; k++) {
            if (i_f[k] < 0 || f[k].fd < 0) continue;
            short ev = pf[i_f[k]].revents;
            if (ev & (POLLERR | POLLHUP)) { /* the run closed its standard input or ended */
                sides_feed_close(&f[k]);
                continue;
            }
            if ((ev & POLLOUT) && f[k].len > f[k].off) {
                ssize_t w = write(f[k].fd, f[k].buf + f[k].off, f[k].len - f[k].off);
                if (w > 0)
                    f[k].off += (size_t)w;
                else if (w < 0 && errno != EINTR && errno != EAGAIN)
                    sides_feed_close(&f[k]);
            }
        }
        for (int k = 0; k < 2; k++)
            if (eof && f[k].fd >= 0 && f[k].len == f[k].off) sides_feed_close(&f[k]); /* end of input */
    }
}

/* Where the union goes: the user's HEAPKIT_GUARD_LOG (%p: this process's
 * id), appended to, else standard error. */
static FILE *sides_out(void) {
    const char *user = getenv("HEAPKIT_GUARD_LOG");
    if (!user || !*user) return stderr;
    char path[PATH_MAX];
    size_t o = 0;
    for (const char *c = user; *c && o + 24 < sizeof path; c++) {
        if (c[0] == '%' && c[1] == 'p') {
            o += (size_t)snprintf(path + o, sizeof path - o, "%ld", (long)getpid());
            c++;
        } else {
            path[o++] = *c;
        }
    }
    path[o] = 0;
    FILE *f = fopen(path, "a");
    return f ? f : stderr;
}

int hk_guard_sides_both(char **argv, int by_default) {
    /* the logs and the second run's overlay layers on /dev/shm when it can
     * be had (outside the overlays); else in /tmp, and the runs one after
     * the other */
    char dir[] = "/dev/shm/heapkit-guard-XXXXXX";
    int on_shm = mkdtemp(dir) != NULL;
    if (!on_shm) {
        memcpy(dir, "/tmp/", 5);
        memcpy(dir + 5, "heapkit-guard-XXXXXX", sizeof "heapkit-guard-XXXXXX");
        if (!mkdtemp(dir)) {
            fprintf(stderr, "heapkit guard: cannot make a temporary directory: %s\n", strerror(errno));
            return 125;
        }
    }
    char log[2][sizeof dir + 16], stage[sizeof dir + 16];
    snprintf(log[0], sizeof log[0], "%s/trailing.log", dir);
    snprintf(log[1], sizeof log[1], "%s/leading.log", dir);
    snprintf(stage, sizeof stage, "%s/stage", dir);
    mkdir(stage, 0700);
    /* standard input: a file (or /dev/null) each run opens again; a pipe
     * or socket the tool copies to both as it comes (keeping what the
     * second run has not read yet); a terminal: by default the first run
     * has it and the second (only when isolated) reads /dev/null; with
     * --sides both the runs share it, one after the other */
    struct stat in_st;
    int in_tty = isatty(0),
        in_file = !in_tty && fstat(0, &in_st) == 0 && !S_ISFIFO(in_st.st_mode) && !S_ISSOCK(in_st.st_mode);
    int st[2] = {-1, -1};
    int ready[2] = {-1, -1}, go[2] = {-1, -1}, in1[2] = {-1, -1}, in2[2] = {-1, -1};
    /* "side by side" is the loop below: the second run goes at once when
     * it is isolated, else when the first has ended (or not at all, with
     * the terminal the first run's) */
    int tty_solo = in_tty && by_default; /* the first run keeps the terminal; the second reads /dev/null */
    /* ready: records (a socket: a twin's write to a tool that is gone fails with EPIPE, no SIGPIPE) */
    int side_by_side = (!in_tty || tty_solo) &&
                       socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ready) == 0 &&
                       pipe2(go, O_CLOEXEC) == 0;
    int pumped =
        side_by_side && !in_tty && !in_file && pipe2(in1, O_CLOEXEC) == 0 && pipe2(in2, O_CLOEXEC) == 0;
    if (side_by_side && !in_tty && !in_file && !pumped) side_by_side = 0;
    if (pumped) { /* the tool's ends: a write never waits for a run that does not read */
        fcntl(in1[1], F_SETFL, O_NONBLOCK);
        fcntl(in2[1], F_SETFL, O_NONBLOCK);
    }
    int in = in_file ? 0 : -1;
    sides_run_spec lead = {"start", log[1],           in, 0,  1, by_default, 1, NULL, -1,
                           -1,      {-1, -1, -1, -1}, 0,  -1, 0, -1,         -1};
    sides_run_spec trail = {"end", log[0], in, 0, 0, 0, 0, NULL, -1, -1, {-1, -1, -1, -1}, 0, -1, 0, -1, -1};
    /* by default, when it can be isolated, the second run forks from the
     * first run's start (shim/guard_twin.c): no second exec, loading and
     * preload start; the tool starts it itself when the first run says
     * it could not fork (or never says) */
    int twin = side_by_side && by_default && on_shm && hk_opt_bool(HK_OPT_GUARD_ISOLATE) &&
               hk_opt_bool(HK_OPT_GUARD_FORK);
    if (side_by_side) {
        lead.dir = on_shm ? dir : NULL; /* NULL: not isolated */
        lead.ready = ready[1];
        lead.go = go[0];
        int other[4] = {ready[0], go[1], in1[1], in2[1]};
        memcpy(lead.other, other, sizeof other);
        memcpy(trail.other, other, sizeof other);
        if (pumped) {
            lead.in = in2[0];
            trail.in = in1[0];
            lead.in_pipe = trail.in_pipe = 1;
        }
        if (tty_solo) lead.in = -2;
        lead.detach = 1;
        if (twin) {
            trail.dir = dir;
            trail.twin_ready = ready[1];
            trail.twin_in = pumped ? 'p' : tty_solo ? 'n' : S_ISCHR(in_st.st_mode) ? 'k' : 'f';
            trail.twin_pipe = pumped ? in2[0] : -1;
            if (in_file) { /* the first run reads the tool's own; a second run the tool starts opens it
                              again where the first started */
                trail.in = -1;
                lead.in_at = lseek(0, 0, SEEK_CUR);
            }
            close(go[0]); /* the twin needs no word to run; a second run the tool starts gets new pipes */
            close(go[1]);
            go[0] = go[1] = -1;
        }
    }
    int killed = 0, skipped = 0;
    sigset_t chld, old_mask;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old_mask);
    sides_program_mask = old_mask;
    sides_ctl ctl = {ready[0], go[1], -1, -1, &st[0], 0, by_default, twin, -1, 's', 0, argv, &lead};
    if (side_by_side) {
        /* the second run sets its namespaces up (some milliseconds) while
         * the first runs */
        if (!twin) ctl.p2 = sides_start(argv, &lead);
        double t0 = sides_now();
        ctl.p1 = twin ? sides_spawn_first(argv, &trail) : -1;
        if (ctl.p1 < 0) ctl.p1 = sides_start(argv, &trail);
        close(ready[1]);
        if (go[0] >= 0) close(go[0]);
        if (pumped) {
            close(in1[0]);
            if (twin)
                ctl.in2 = in2[0]; /* until the second run has it */
            else
                close(in2[0]);
        }
        sides_feed f[2] = {{pumped ? in1[1] : -1, NULL, 0, 0, 0}, {pumped ? in2[1] : -1, NULL, 0, 0, 0}};
        struct sigaction ign = {0}, old_pipe;
        ign.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &ign, &old_pipe);
        sides_pump(f, &ctl);
        sigaction(SIGPIPE, &old_pipe, NULL);
        if (ctl.in2 >= 0) close(ctl.in2);
        if (!ctl.p1_done) st[0] = sides_wait(ctl.p1);
        double took = sides_now() - t0;
        skipped = by_default && ctl.reply != 'i';
        st[1] =
            skipped ? sides_wait(ctl.p2) : sides_wait_limited(ctl.p2, took * 2 > 10 ? took * 2 : 10, &killed);
    } else {
        for (int k = 0; k < 2; k++) {
            if (ready[k] >= 0) close(ready[k]);
            if (go[k] >= 0) close(go[k]);
        }
        st[0] = sides_wait(sides_start(argv, &trail));
        skipped = by_default; /* by default, never twice without isolation */
        if (!skipped) st[1] = sides_wait(sides_start(argv, &lead));
    }
    char reply = ctl.reply; /* the second run's word on its isolation (hk__iso_isolate) */
    sigprocmask(SIG_SETMASK, &old_mask, NULL);

    static sides_report reps[SIDES_MAX_REPORTS];
    int nr = 0, got[2] = {0, 0};
    char *text[2];
    for (int k = 0; k < 2; k++) {
        size_t n;
        text[k] = sides_slurp(log[k], &n);
        if (text[k]) got[k] = sides_split(text[k], n, k, reps, &nr);
        unlink(log[k]);
    }
    /* the second run's layers were on a tmpfs of its own namespace: an
     * empty stage is left, unless that mount failed */
    if (rmdir(stage) != 0 || rmdir(dir) != 0) sides_rm_tree(dir);
    FILE *out = sides_out();
    sides_notes(out, text[0], NULL);
    sides_notes(out, text[1], text[0]);
    /* One bug seen by both runs (the same kind on a block from the same
     * allocation stack) is shown once: the report made at the access
     * rather than one found later at free, else the first run's. */
    for (int i = 0; i < nr; i++) {
        sides_report *b = &reps[i];
        for (int j = 0; j < nr && b->run == 1 && !b->dropped; j++) {
            sides_report *a = &reps[j];
            if (a->run != 0 || a->dropped || !b->alloc[0] || strcmp(a->kind, b->kind) != 0 ||
                strcmp(a->alloc, b->alloc) != 0)
                continue;
            if (a->late && !b->late)
                a->dropped = 1;
            else
                b->dropped = 1;
        }
    }
    int shown = 0;
    for (int i = 0; i < nr; i++) {
        int dup = reps[i].dropped;
        for (int j = 0; j < i && !dup; j++) dup = !reps[j].dropped && strcmp(reps[i].key, reps[j].key) == 0;
        if (dup) continue;
        fwrite(reps[i].text, 1, reps[i].len, out);
        shown++;
    }
    if (skipped)
        fprintf(out,
                "heapkit guard: under-reads not checked: the second run (guard page before each block) "
                "could not be isolated (%s) and was not run; --sides both runs it anyway, its writes "
                "then happening twice (--sides trailing: one run, no note)\n",
                sides_why(reply));
    else if (!by_default && reply != 'i')
        fprintf(out,
                "heapkit guard: --sides both: the second run was not isolated (%s): its writes happened "
                "twice\n",
                sides_why(reply));
    if (!skipped && !killed && by_default && st[0] == 0 && st[1] != 0 && !got[0] && !got[1])
        fprintf(out,
                "heapkit guard: the second run (guard page before each block) ended early (status %d) "
                "without a report: under-reads past that point are not checked (it cannot write outside "
                "the working directory and /tmp, nor use the network; --sides both shows its output)\n",
                sides_status(st[1]));
    if (killed)
        fprintf(out, "heapkit guard: the run with the guard page before each block did not end in time: "
                     "stopped (--sides trailing runs the program once)\n");
    if (!by_default)
        fprintf(out,
                "heapkit guard: --sides both: %d report%s (trailing guard: %d, leading guard: %d, each shown "
                "once)\n",
                shown, shown == 1 ? "" : "s", got[0], got[1]);
    if (out != stderr) fclose(out);
    free(text[0]);
    free(text[1]);
    int rc0 = sides_status(st[0]), rc1 = killed || skipped ? 0 : sides_status(st[1]);
    if (got[0] || got[1]) return rc0 ? rc0 : rc1 ? rc1 : 23;
    return rc0;
}
