/*
 * tools/guard_isolate.c - the isolation of `heapkit guard`'s second run: a
 * mount namespace with overlays over the working directory and /tmp, every
 * other mount read-only, and a seccomp filter that keeps it off the network
 * (see tools/guard_isolate.h and docs/guard.md, "Isolation"). Compiled into
 * the tool and into the preload (which forks the second run from the first
 * run's start and isolates it there).
 *
 * Invariants: nothing here allocates or writes to a stream (the preload calls it
 * in a freshly forked process, before main); each step either succeeds or
 * says which failed, and a failure leaves only the calling process's own
 * namespaces behind (the caller then does not run as the second run).
 */
#define _GNU_SOURCE 1
#include "guard_isolate.h"
#include "options.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int sides_write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Mounts an overlay over dir whose upper layer is stage/<name>; 0 on success. */
static int sides_overlay(const char *dir, const char *stage, const char *name) {
    char up[PATH_MAX], work[PATH_MAX], opts[3 * PATH_MAX + 64];
    snprintf(up, sizeof up, "%s/%s-u", stage, name);
    snprintf(work, sizeof work, "%s/%s-w", stage, name);
    if (mkdir(up, 0755) != 0 || mkdir(work, 0755) != 0) return -1;
    if (snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", dir, up, work) >= (int)sizeof opts)
        return -1;
    return mount("overlay", dir, "overlay", 0, opts);
}

/* The second run's network: a seccomp filter makes socket() of the
 * internet and packet families, connect(), bind(), sendto() with an address
 * and io_uring fail with EACCES (ENOSYS for io_uring), so the run reaches
 * no server, binds no port or abstract name the first run needs and talks
 * to no local daemon; socketpairs and connected descriptors it inherits
 * work. 0 when installed. (A network namespace did the same with loopback
 * kept, at about 0.6 ms of CPU time per run here and a kernel worker's
 * teardown after it: see docs/guard.md.) */
static int sides_no_network(void) {
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
    const uint32_t arch = AUDIT_ARCH_X86_64;
#else
    const uint32_t arch = AUDIT_ARCH_AARCH64;
#endif
#define SIDES_NR      offsetof(struct seccomp_data, nr)
#define SIDES_ARCH    offsetof(struct seccomp_data, arch)
#define SIDES_ARG(k)  offsetof(struct seccomp_data, args[k])
#define SIDES_DENY(e) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SIDES_ARCH),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        SIDES_DENY(EACCES), /* another ABI: nothing passes */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SIDES_NR),
#if defined(__x86_64__)
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1), /* x32 */
        SIDES_DENY(EACCES),
#endif
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_connect, 0, 1),
        SIDES_DENY(EACCES),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_bind, 0, 1),
        SIDES_DENY(EACCES),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 0, 1),
        SIDES_DENY(ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendto, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SIDES_ARG(4)), /* the address, low and high words */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SIDES_ARG(4) + 4),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 6, 5), /* NULL: allow; else deny */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SIDES_ARG(0)), /* the family */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_PACKET, 0, 1),
        SIDES_DENY(EACCES),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
#undef SIDES_NR
#undef SIDES_ARCH
#undef SIDES_ARG
#undef SIDES_DENY
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
    return -1; /* no filter written for this architecture: not isolated */
#endif
}

extern char **environ;

/* Sets the variable that `text` ("NAME=value", which must outlive the
 * process's use of it) names: in place of its entry in environ when there
 * is one (no allocation: in the second run forked from the first, every
 * allocation is a guarded block's system calls), else with putenv, which
 * keeps `text` itself. */
void hk__iso_put(const char *text) {
    size_t len = (size_t)(strchr(text, '=') - text) + 1;
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, text, len) == 0) {
            *e = (char *)(uintptr_t)text;
            return;
        }
    putenv((char *)(uintptr_t)text);
}

void hk__iso_second_env(const char *log) {
    static char log_var[PATH_MAX + 32];
    snprintf(log_var, sizeof log_var, "HEAPKIT_GUARD_LOG=%s", log);
    hk__iso_put("HEAPKIT_GUARD_SIDE=start");
    hk__iso_put(log_var);
    hk__iso_put("HEAPKIT_GUARD_LEAKS=0");
    hk__iso_put("HEAPKIT_GUARD_QUARANTINE=0");
    hk__iso_put("HEAPKIT_GUARD_FAST_REUSE=1");
    unsetenv("DISPLAY");
    unsetenv("WAYLAND_DISPLAY");
    unsetenv("XDG_RUNTIME_DIR");
    unsetenv("DBUS_SESSION_BUS_ADDRESS");
}

void hk__iso_cloexec_from(int from) {
#if defined(SYS_close_range) && defined(CLOSE_RANGE_CLOEXEC)
    if (syscall(SYS_close_range, (unsigned)from, ~0u, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) max = 65536;
    for (int fd = from; fd < (int)max; fd++) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* mount_setattr(2) (Linux 5.12+): attributes of a mount, or of a tree. */
static int sides_setattr(const char *path, unsigned flags, uint64_t set, uint64_t clr) {
#if defined(SYS_mount_setattr) && defined(MOUNT_ATTR_RDONLY)
    struct mount_attr a;
    memset(&a, 0, sizeof a);
    a.attr_set = set;
    a.attr_clr = clr;
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &a, sizeof a);
#else
    (void)path, (void)flags, (void)set, (void)clr;
    errno = ENOSYS;
    return -1;
#endif
}

/* See guard_isolate.h. */
char hk__iso_isolate(const char *dir, const char *stage) {
    if (!hk_opt_bool(HK_OPT_GUARD_ISOLATE)) return 'd';
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWNS) != 0) {
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return 'n';
        char map[64];
        sides_write_file("/proc/self/setgroups", "deny");
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
        if (sides_write_file("/proc/self/uid_map", map) != 0) return 'n';
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
        if (sides_write_file("/proc/self/gid_map", map) != 0) return 'n';
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return 'n';
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return 'o';
    if (mount(dir, dir, NULL, MS_BIND, NULL) != 0) return 'o';
    /* the layers on a tmpfs of this namespace's own: they go with it, and
     * the tool has nothing but an empty directory to remove (on failure,
     * in stage itself, which the tool then removes) */
    (void)mount("heapkit-guard", stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700");
    /* the working directory, unless /tmp holds it (the /tmp overlay covers
     * it) or it holds /tmp (the root: left read-only) */
    int cwd_in_tmp = strcmp(cwd, "/tmp") == 0 || strncmp(cwd, "/tmp/", 5) == 0;
    int cwd_ovl = !cwd_in_tmp && strcmp(cwd, "/") != 0;
    if (cwd_ovl && sides_overlay(cwd, stage, "cwd") != 0) return 'o';
    if (sides_overlay("/tmp", stage, "tmp") != 0) return 'o';
    if (sides_setattr("/", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0) != 0) return 'r';
    if ((cwd_ovl && sides_setattr(cwd, 0, 0, MOUNT_ATTR_RDONLY) != 0) ||
        sides_setattr("/tmp", 0, 0, MOUNT_ATTR_RDONLY) != 0 ||
        sides_setattr(dir, 0, 0, MOUNT_ATTR_RDONLY) != 0)
        return 'r';
    if (chdir(cwd) != 0) return 'o'; /* through the overlay from now on */
    return sides_no_network() == 0 ? 'i' : 'f';
}
