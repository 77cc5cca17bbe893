/*
 * src/os_posix_symbols.c - symbolization (hk_os_symbolize in src/os.h):
 * dladdr for the module and nearest exported symbol of each address, then
 * `addr2line -f -C` once per module for function names and file:line.
 *
 * Invariants: no malloc and no stdio (reports are written after faults and
 * by a heap that may be the process's malloc): addr2line runs through the
 * raw fork system call, execve and a pipe, with LD_PRELOAD removed from its
 * environment; its output lands in a static buffer. The addr2line path is
 * looked up once (hk_os_symbolize_init), never at report time.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

uintptr_t hk_os_module_base(const void *addr) {
    Dl_info info;
    if (dladdr(addr, &info)) return (uintptr_t)info.dli_fbase;
    return 0;
}

uintptr_t hk_os_main_base(void) {
    unsigned long phdr = getauxval(AT_PHDR);
    return phdr ? hk_os_module_base((const void *)phdr) : 0;
}

/* ---- addr2line ------------------------------------------------------------------ */

static char sym_a2l_path[512];
static int sym_a2l_looked;

void hk_os_symbolize_init(void) {
    if (__atomic_load_n(&sym_a2l_looked, __ATOMIC_ACQUIRE)) return;
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    char found[sizeof sym_a2l_path];
    found[0] = 0;
    const char *s = path;
    while (*s) {
        const char *e = strchr(s, ':');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n > 0 && n + sizeof "/addr2line" < sizeof found) {
            memcpy(found, s, n);
            memcpy(found + n, "/addr2line", sizeof "/addr2line");
            if (access(found, X_OK) == 0) break;
            found[0] = 0;
        }
        if (!e) break;
        s = e + 1;
    }
    memcpy(sym_a2l_path, found, sizeof found);
    __atomic_store_n(&sym_a2l_looked, 1, __ATOMIC_RELEASE);
}

#define SYM_BATCH 128

/* Runs `addr2line -f -C -e module addr...`, its output in out
 * (NUL-terminated). Returns the bytes read, or -1. */
static long sym_addr2line(const char *tool, const char *module, const uintptr_t *addrs, int n, char *out,
                          size_t outn) {
    static char argbuf[SYM_BATCH][24];
    static char *argv[SYM_BATCH + 8];
    static char *envp[512];
    if (!tool || !tool[0] || n <= 0 || outn == 0) return -1;
    if (n > SYM_BATCH) n = SYM_BATCH;
    int a = 0;
    argv[a++] = (char *)(uintptr_t)tool;
    argv[a++] = (char *)(uintptr_t) "-f";
    argv[a++] = (char *)(uintptr_t) "-C";
    argv[a++] = (char *)(uintptr_t) "-e";
    argv[a++] = (char *)(uintptr_t)module;
    for (int i = 0; i < n; i++) {
        /* 0x + hex */
        char *b = argbuf[i];
        uintptr_t v = addrs[i];
        char tmp[20];
        int k = 0;
        do {
            unsigned d = (unsigned)(v & 15u);
            tmp[k++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
            v >>= 4;
        } while (v && k < 20);
        int j = 0;
        b[j++] = '0';
        b[j++] = 'x';
        while (k > 0) b[j++] = tmp[--k];
        b[j] = 0;
        argv[a++] = b;
    }
    argv[a] = NULL;
    int e = 0;
    for (char **ev = environ; ev && *ev && e < 511; ev++)
        if (strncmp(*ev, "LD_PRELOAD=", 11) != 0) envp[e++] = *ev;
    envp[e] = NULL;

    int fds[2];
    if (pipe(fds) != 0) return -1;
        /* The raw system call: glibc's fork() would run pthread_atfork handlers
         * (a preload's take its heap lock) from inside a report. */
#ifdef SYS_fork
    pid_t pid = (pid_t)syscall(SYS_fork);
#else
    pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 2);
        }
        dup2(fds[1], 1);
        close(fds[0]);
        execve(tool, argv, envp);
        _exit(127);
    }
    close(fds[1]);
    size_t have = 0;
    for (;;) {
        if (have + 1 >= outn) {
            char sink[256];
            if (read(fds[0], sink, sizeof sink) <= 0) break;
            continue;
        }
        ssize_t r = read(fds[0], out + have, outn - 1 - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        have += (size_t)r;
    }
    out[have] = 0;
    close(fds[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return (long)have;
}

static void sym_copy(char *dst, size_t cap, const char *src) {
    size_t m = strlen(src);
    if (m >= cap) m = cap - 1;
    memcpy(dst, src, m);
    dst[m] = 0;
}

/* The address addr2line wants for entry s: ET_EXEC modules want absolute
 * addresses, ET_DYN ones offsets from the load address. */
static uintptr_t sym_lookup_addr(const hk_os_symbol *s) {
    uintptr_t a = s->return_address ? s->pc - 1 : s->pc;
    uint16_t e_type = 3;
    if (s->base) memcpy(&e_type, (const void *)(s->base + 16), sizeof e_type);
    return e_type == 2 ? a : a - s->base;
}

/* Runs addr2line over a batch of entries of one module; fills func and loc. */
static void sym_resolve_batch(hk_os_symbol *syms, const int *idx, int n) {
    static char out[1 << 15];
    uintptr_t addrs[SYM_BATCH];
    for (int k = 0; k < n; k++) addrs[k] = sym_lookup_addr(&syms[idx[k]]);
    if (sym_addr2line(sym_a2l_path, syms[idx[0]].module, addrs, n, out, sizeof out) <= 0) return;
    char *p = out;
    for (int k = 0; k < n && *p; k++) {
        char *l1 = p;
        char *e1 = strchr(l1, '\n');
        if (!e1) break;
        *e1 = 0;
        char *l2 = e1 + 1;
        char *e2 = strchr(l2, '\n');
        if (!e2) break;
        *e2 = 0;
        p = e2 + 1;
        hk_os_symbol *s = &syms[idx[k]];
        if (strcmp(l1, "??") != 0) sym_copy(s->func, sizeof s->func, l1);
        if (l2[0] != '?' || l2[1] != '?') {
            char *d = strstr(l2, " (discriminator"); /* strip " (discriminator N)" */
            if (d) *d = 0;
            sym_copy(s->loc, sizeof s->loc, l2);
        }
    }
}

void hk_os_symbolize(hk_os_symbol *syms, int n, unsigned flags) {
    for (int i = 0; i < n; i++) {
        hk_os_symbol *s = &syms[i];
        Dl_info info;
        s->module = NULL;
        s->base = 0;
        s->name = NULL;
        s->name_addr = 0;
        s->func[0] = 0;
        s->loc[0] = 0;
        if (dladdr((void *)s->pc, &info)) {
            s->module = info.dli_fname;
            s->base = (uintptr_t)info.dli_fbase;
            s->name = info.dli_sname;
            s->name_addr = (uintptr_t)info.dli_saddr;
        }
    }
    if (!(flags & HK_OS_SYMBOLIZE_LINES) || !__atomic_load_n(&sym_a2l_looked, __ATOMIC_ACQUIRE) ||
        !sym_a2l_path[0])
        return;
    /* once per module: the first entry of each module collects the others */
    for (int i = 0; i < n; i++) {
        if (!syms[i].module || !syms[i].module[0]) continue;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = syms[j].module && strcmp(syms[j].module, syms[i].module) == 0;
        if (seen) continue;
        int idx[SYM_BATCH], k = 0;
        for (int j = i; j < n; j++) {
            if (!syms[j].module || strcmp(syms[j].module, syms[i].module) != 0) continue;
            idx[k++] = j;
            if (k == SYM_BATCH) {
                sym_resolve_batch(syms, idx, k);
                k = 0;
            }
        }
        if (k) sym_resolve_batch(syms, idx, k);
    }
}
