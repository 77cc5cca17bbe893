/*
 * shim/guard_twin.c - `heapkit guard`'s second run (guard page before each
 * block) forked from the first run's start, in the preload's constructor,
 * instead of the tool starting the program a second time: the second run
 * costs no exec, no dynamic loading and no preload start of its own.
 *
 * The tool sets HEAPKIT_GUARD_TWIN for the first run to
 * "READY:IN:TOOL:FDS:DIR": READY the descriptor of the socket the
 * tool reads records from; IN the second run's standard input ('f' the same
 * file, opened again at the offset the first run starts from; 'k' the
 * same descriptor (a character device such as /dev/null: no offset); 'n'
 * /dev/null; 'pN' the pipe on descriptor N the tool feeds); TOOL the
 * tool's pid; FDS the descriptors the program inherited past standard
 * error ("-": none), which the second run closes; DIR the tool's
 * directory (the second run's log DIR/leading.log, overlays in DIR/stage).
 *
 * Invariants: the variable is spent in every process that sees it (its
 * value cut to "0" in place, then unset in the first run and "0:second"
 * in the second, replaced in place), so the program's children never
 * fork second runs of their own: a child of the first run is a first run,
 * a child of the second run is a second run through the variables the
 * second run sets (the tool set each of them for the first run already,
 * so they are replaced in place and main's envp agrees with environ);
 * the second run is forked only from a process with one thread whose
 * environment is still the one it was started with, as a child of the
 * tool (CLONE_PARENT: the first run never sees it in wait() or SIGCHLD),
 * with the thread id glibc caches set by the kernel (CLONE_CHILD_SETTID
 * at the address glibc registered); the tool hears one record per event
 * ('F' and the pid from the first run after the fork, 'T' when it did not
 * fork, then the second run's isolation verdict, hk__iso_isolate's
 * letter); a second run that could not be isolated ends at once.
 */
#define _GNU_SOURCE 1
#include "guard_twin.h"
#include "guard_isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__)) && defined(PR_GET_TID_ADDRESS)
#define HK_TWIN_CAN 1
#include <sched.h>
#else
#define HK_TWIN_CAN 0
#endif

extern char **environ;
extern char __libc_single_threaded __attribute__((weak)); /* glibc 2.32+ */

#define TWIN_FDS_MAX 64

typedef struct twin_spec {
    int ready, in_fd;
    char in_kind;
    pid_t tool;
    int fds[TWIN_FDS_MAX], nfds;
    char dir[PATH_MAX];
} twin_spec;

/* One record to the tool: a letter and a pid (one packet). */
static void twin_tell(int fd, char what, pid_t pid) {
    int32_t rec[2] = {(int32_t)(unsigned char)what, (int32_t)pid};
    ssize_t w;
    do { /* a socket: a tool that is gone means EPIPE, not SIGPIPE for the program */
        w = send(fd, rec, sizeof rec, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
}

static long twin_num(const char **p) {
    char *e;
    long v = strtol(*p, &e, 10);
    *p = e;
    return v;
}

static int twin_parse(const char *v, twin_spec *t) {
    const char *p = v;
    t->ready = (int)twin_num(&p);
    if (*p++ != ':') return 0;
    t->in_kind = *p++;
    t->in_fd = -1;
    if (t->in_kind == 'p') t->in_fd = (int)twin_num(&p);
    if (*p++ != ':') return 0;
    t->tool = (pid_t)twin_num(&p);
    if (*p++ != ':') return 0;
    t->nfds = 0;
    if (*p == '-') {
        p++;
    } else {
        while (*p >= '0' && *p <= '9' && t->nfds < TWIN_FDS_MAX) {
            t->fds[t->nfds++] = (int)twin_num(&p);
            if (*p == ',') p++;
        }
    }
    if (*p++ != ':' || strlen(p) + 32 >= sizeof t->dir) return 0;
    memcpy(t->dir, p, strlen(p) + 1);
    return t->ready > 2 && t->tool > 1 && t->dir[0] == '/' &&
           (t->in_kind == 'f' || t->in_kind == 'k' || t->in_kind == 'n' ||
            (t->in_kind == 'p' && t->in_fd > 2));
}

static void twin_onto(const char *path, int flags, int to) {
    int fd = open(path, flags | O_CLOEXEC, 0644);
    if (fd < 0) return;
    if (fd != to) {
        dup2(fd, to); /* the target loses close-on-exec: standard streams keep theirs */
        close(fd);
    }
}

#if HK_TWIN_CAN
/* fork(), but the child's parent is the tool (the first run's parent) */
static pid_t twin_clone(void *tid) {
    unsigned long flags = CLONE_PARENT | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD;
#if defined(__x86_64__)
    return (pid_t)syscall(SYS_clone, flags, 0, NULL, tid, 0);
#else
    return (pid_t)syscall(SYS_clone, flags, 0, NULL, 0, tid);
#endif
}
#endif

/* In the second run, just forked: its streams, log, heap, variables and
 * isolation. */
static void twin_become(hk_guard *g, int log_fd, const twin_spec *t, off_t in_off) {
    setsid(); /* no controlling terminal: it cannot open /dev/tty */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != t->tool) _exit(125); /* the tool is gone already */
    if (t->in_kind == 'f') {
        int fd = open("/proc/self/fd/0", O_RDONLY | O_CLOEXEC); /* a file description of its own */
        if (fd >= 0) {
            if (in_off > 0) lseek(fd, in_off, SEEK_SET);
            dup2(fd, 0);
            close(fd);
        }
    } else if (t->in_kind == 'p') {
        dup2(t->in_fd, 0);
        close(t->in_fd);
    } else if (t->in_kind == 'n') {
        twin_onto("/dev/null", O_RDONLY, 0);
    }
    int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (nul >= 0) { /* standard output and error: the targets lose close-on-exec */
        dup2(nul, 1);
        dup2(nul, 2);
        if (nul > 2) close(nul);
    }
    char log[PATH_MAX + 32], stage[PATH_MAX + 32];
    snprintf(log, sizeof log, "%s/leading.log", t->dir);
    snprintf(stage, sizeof stage, "%s/stage", t->dir);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dup3(fd, log_fd, O_CLOEXEC);
        close(fd);
    }
    hk_guard_lead_from_now(g);
    /* the second run's settings for its own children (the tool set each
     * variable for the first run: replaced in place) */
    hk__iso_second_env(log);
    hk__iso_put("HEAPKIT_GUARD_TWIN=0:second"); /* spent; says (to tests) which run this is */
    char c = hk__iso_isolate(t->dir, stage);
    if (c == 'i') /* what the program inherited past standard error is not the second run's */
        for (int k = 0; k < t->nfds; k++)
            if (t->fds[k] != log_fd && t->fds[k] != t->ready) close(t->fds[k]);
    twin_tell(t->ready, c, getpid());
    close(t->ready);
    if (c != 'i') _exit(0); /* not isolated: no second run (the tool says so) */
}

int hk__twin_start(hk_guard *g, int log_fd, char **envp) {
    char *v = getenv("HEAPKIT_GUARD_TWIN");
    if (!v || !*v || *v == '0') return 0;
    static twin_spec t;
    int ok = twin_parse(v, &t);
    v[0] = '0'; /* spent, in every copy of the environment that lists this string */
    v[1] = 0;
    if (!ok || fcntl(t.ready, F_GETFD) < 0) {
        unsetenv("HEAPKIT_GUARD_TWIN");
        return 0;
    }
    void *tid = NULL;
    int can = HK_TWIN_CAN && g && log_fd > 2 && &__libc_single_threaded && __libc_single_threaded &&
              envp == environ && getppid() == t.tool;
#if HK_TWIN_CAN
    if (can && (prctl(PR_GET_TID_ADDRESS, &tid, 0, 0, 0) != 0 || !tid)) can = 0;
#endif
    pid_t pid = -1;
    off_t in_off = t.in_kind == 'f' ? lseek(0, 0, SEEK_CUR) : 0;
#if HK_TWIN_CAN
    if (can) {
        fflush(NULL);
        hk_guard_fork_prepare(g);
        pid = twin_clone(tid);
        if (pid == 0) {
            hk_guard_fork_child(g);
            twin_become(g, log_fd, &t, in_off);
            return 1;
        }
        hk_guard_fork_parent(g);
    }
    unsetenv("HEAPKIT_GUARD_TWIN");
#else
    (void)tid;
    (void)in_off;
#endif
    twin_tell(t.ready, pid > 0 ? 'F' : 'T', pid > 0 ? pid : 0);
    close(t.ready);
    if (t.in_kind == 'p') close(t.in_fd);
    return 0;
}
