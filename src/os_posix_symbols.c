/*
 * src/os_posix_symbols.c - symbolization (hk_os_symbolize in src/os.h):
 * dladdr for the module and nearest exported symbol of each address, then
 * function names and file:line, in process with elfutils' libdwfl when
 * libdw.so.1 can be loaded, else from one long-lived `addr2line` per module.
 *
 * libdwfl: the eight entry points used are declared below (no development
 * header at build time: Debian's libdw1, which a fresh system often has,
 * is enough) and looked up with dlopen/dlsym at the first symbolization
 * with lines (HEAPKIT_NO_LIBDW=1 keeps addr2line), so neither libheapkit
 * nor the preload links against it and a run without a report does not
 * load it. One Dwfl session per process, made at the first report: it
 * reads the process's module list once and each module's symbol table and
 * DWARF line table once (its own caches), so a report costs table lookups,
 * not a process and a DWARF parse. An address in a module loaded after
 * that re-reads the list once. libdw allocates with malloc: the guard's
 * reports run where the preload serves such re-entrant calls unguarded,
 * without its lock.
 *
 * addr2line: no malloc and no stdio. A module's server is started at its
 * first lookup through the raw fork system call and execve, with
 * LD_PRELOAD removed from its environment, and answers every later report
 * of the process over a socket pair: one process per module and run, not
 * per report; it holds none of the program's descriptors but the pair. The
 * addr2line path is looked up once, at the first report that needs it, on
 * the PATH hk_os_symbolize_init kept (access() only: safe in a fault
 * handler).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- libdwfl, declared here ----------------------------------------------------------
 * The few entry points used, with the types of elfutils' libdwfl.h (an ABI
 * stable since elfutils 0.122: the symbols carry version ELFUTILS_0.122 and
 * later), so no development header is needed at build time: a machine with
 * the run-time library alone (Debian libdw1) gets in-process lines. */
typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Line Dwfl_Line;
typedef uint64_t Dwarf_Addr;
typedef uint64_t Dwarf_Word;
typedef struct sym_dwfl_callbacks { /* Dwfl_Callbacks: four members, in this order */
    void *find_elf;
    void *find_debuginfo;
    void *section_address;
    char **debuginfo_path;
} sym_dwfl_callbacks;
typedef int (*sym_dwfl_removed_fn)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *);

static void sym_copy(char *dst, size_t cap, const char *src);

/* ---- libdwfl, loaded at run time ---------------------------------------------------- */

typedef struct sym_dwfl_api {
    Dwfl *(*begin)(const sym_dwfl_callbacks *);
    void (*report_begin)(Dwfl *);
    int (*proc_report)(Dwfl *, pid_t);
    int (*report_end)(Dwfl *, sym_dwfl_removed_fn, void *);
    Dwfl_Module *(*addrmodule)(Dwfl *, Dwarf_Addr);
    const char *(*addrname)(Dwfl_Module *, Dwarf_Addr);
    Dwfl_Line *(*getsrc)(Dwfl_Module *, Dwarf_Addr);
    const char *(*lineinfo)(Dwfl_Line *, Dwarf_Addr *, int *, int *, Dwarf_Word *, Dwarf_Word *);
} sym_dwfl_api;

static sym_dwfl_api sym_dw;
static sym_dwfl_callbacks sym_dw_cb;
static Dwfl *sym_dw_session;
static int sym_dw_ok;       /* the library and every function were found */
static int sym_dw_reported; /* the module list was re-read after a miss */

static int sym_dw_wanted; /* HEAPKIT_NO_LIBDW unset (read at init: the addr2line path for comparisons) */
static int sym_dw_tried;

/* Loads libdw at the first report (not at start: a run without a report
 * pays nothing for it, and loads no extra modules). */
static void sym_dwfl_load(void) {
    if (sym_dw_tried || !sym_dw_wanted) return;
    sym_dw_tried = 1;
    void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    void *f[10];
    static const char *const names[10] = {"dwfl_begin",
                                          "dwfl_report_begin",
                                          "dwfl_linux_proc_report",
                                          "dwfl_report_end",
                                          "dwfl_addrmodule",
                                          "dwfl_module_addrname",
                                          "dwfl_module_getsrc",
                                          "dwfl_lineinfo",
                                          "dwfl_linux_proc_find_elf",
                                          "dwfl_standard_find_debuginfo"};
    for (int i = 0; i < 10; i++)
        if (!(f[i] = dlsym(h, names[i]))) return;
    memcpy(&sym_dw.begin, &f[0], sizeof f[0]);
    memcpy(&sym_dw.report_begin, &f[1], sizeof f[1]);
    memcpy(&sym_dw.proc_report, &f[2], sizeof f[2]);
    memcpy(&sym_dw.report_end, &f[3], sizeof f[3]);
    memcpy(&sym_dw.addrmodule, &f[4], sizeof f[4]);
    memcpy(&sym_dw.addrname, &f[5], sizeof f[5]);
    memcpy(&sym_dw.getsrc, &f[6], sizeof f[6]);
    memcpy(&sym_dw.lineinfo, &f[7], sizeof f[7]);
    sym_dw_cb.find_elf = f[8];
    sym_dw_cb.find_debuginfo = f[9];
    sym_dw_ok = 1;
}

/* The system's own libraries (libc, libstdc++, ...): their symbol and line
 * tables come from separate, compressed debug files when installed
 * (libc6-dbg: some 200 million instructions of inflate for libc's lines,
 * 7 million to sort its full symbol table), and a report is about the
 * program's code. Frames there keep dladdr's exported name. */
static int sym_is_system_module(const char *path) {
    if (!path) return 0;
    return strncmp(path, "/lib/", 5) == 0 || strncmp(path, "/lib64/", 7) == 0 ||
           strncmp(path, "/usr/lib/", 9) == 0 || strncmp(path, "/usr/lib64/", 11) == 0;
}

/* (Re-)reads the process's modules into the session. */
static int sym_dwfl_report(void) {
    if (!sym_dw_session) {
        sym_dw_session = sym_dw.begin(&sym_dw_cb);
        if (!sym_dw_session) return 0;
    }
    sym_dw.report_begin(sym_dw_session);
    int rc = sym_dw.proc_report(sym_dw_session, getpid());
    sym_dw.report_end(sym_dw_session, NULL, NULL);
    return rc == 0;
}

/* Fills func and loc of s from libdwfl. Returns 0 when the session is not
 * usable (the caller falls back to addr2line). */
static int sym_dwfl_resolve(hk_os_symbol *s) {
    if (!sym_dw_session && !sym_dwfl_report()) return 0;
    Dwarf_Addr a = (Dwarf_Addr)(s->return_address ? s->pc - 1 : s->pc);
    Dwfl_Module *m = sym_dw.addrmodule(sym_dw_session, a);
    if (!m && !sym_dw_reported) { /* a module loaded since: read the list once more */
        sym_dw_reported = 1;
        if (sym_dwfl_report()) m = sym_dw.addrmodule(sym_dw_session, a);
    }
    if (!m) return 1;
    if (sym_is_system_module(s->module)) return 1; /* dladdr's name only: see sym_is_system_module */
    const char *fn = sym_dw.addrname(m, a);
    if (fn) sym_copy(s->func, sizeof s->func, fn);
    Dwfl_Line *line = sym_dw.getsrc(m, a);
    int lineno = 0;
    const char *file = line ? sym_dw.lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
    if (file && lineno > 0) {
        char num[16];
        int k = 0;
        unsigned v = (unsigned)lineno;
        do {
            num[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v && k < 15);
        size_t fl = strlen(file), cap = sizeof s->loc;
        if (fl + 2 + (size_t)k > cap) { /* keep the end of a long path */
            file += fl + 2 + (size_t)k - cap;
            fl = strlen(file);
        }
        memcpy(s->loc, file, fl);
        s->loc[fl] = ':';
        size_t o = fl + 1;
        while (k) s->loc[o++] = num[--k];
        s->loc[o] = 0;
    }
    return 1;
}

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
static char sym_a2l_search[4096]; /* PATH as it was at init (the program may change it) */
static int sym_a2l_looked;        /* init ran */
static int sym_a2l_found;         /* the search ran (at the first symbolization that needs it) */

/* Keeps PATH for the addr2line search, which runs at the first report that
 * needs it (sym_a2l_find): a run without a report makes no access() calls. */
void hk_os_symbolize_init(void) {
    if (__atomic_load_n(&sym_a2l_looked, __ATOMIC_ACQUIRE)) return;
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    size_t n = strlen(path);
    if (n >= sizeof sym_a2l_search) { /* cut at the last whole directory that fits */
        n = sizeof sym_a2l_search - 1;
        while (n && path[n] != ':') n--;
    }
    memcpy(sym_a2l_search, path, n);
    sym_a2l_search[n] = 0;
    /* not under ThreadSanitizer: it rightly flags libdw's malloc calls in
     * the fault handler (a report is written there) */
    sym_dw_wanted = getenv("HEAPKIT_NO_LIBDW") == NULL && !hk__tsan_enabled();
    __atomic_store_n(&sym_a2l_looked, 1, __ATOMIC_RELEASE);
}

/* The addr2line search over the PATH kept at init: access() only (callers
 * serialize, and may be in a fault handler). */
static void sym_a2l_find(void) {
    if (sym_a2l_found) return;
    sym_a2l_found = 1;
    char found[sizeof sym_a2l_path];
    found[0] = 0;
    const char *s = sym_a2l_search;
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
}

#define SYM_BATCH   128
#define SYM_SERVERS 16 /* modules with a running addr2line */

/* One addr2line per module, started at the module's first lookup and kept
 * for the rest of the process: `addr2line -f -C -e module` with no address
 * on its command line reads addresses from standard input, one a line, and
 * answers each with two lines (function, file:line), flushed at once. Its
 * standard input and output are one end of a socket pair (the other is
 * ours, close-on-exec), so a write to a dead server fails with EPIPE
 * (MSG_NOSIGNAL) instead of raising SIGPIPE in the program. A forked child
 * inherits its parent's servers but starts its own (pid check): two
 * processes writing to one server would mix their answers. */
typedef struct sym_server {
    char module[256];
    pid_t owner; /* the process that started it */
    int fd;      /* -1: not started, or dead */
} sym_server;

static sym_server sym_servers[SYM_SERVERS];
static int sym_nservers;

static void sym_hex(char *b, uintptr_t v) {
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
}

/* Starts `addr2line -f -C -e module` on a socket pair; returns its fd or -1.
 * The server is a grandchild (its parent exits at once and is reaped
 * here), so it is never the program's child: a program that waits for all
 * its children does not wait for it, and it ends by itself when our end of
 * the pair is closed (at the latest when this process ends). */
static pid_t sym_raw_fork(void) {
    /* The raw system call: glibc's fork() would run pthread_atfork handlers
     * (a preload's take its heap lock) from inside a report. */
#ifdef SYS_fork
    return (pid_t)syscall(SYS_fork);
#else
    return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
}

static int sym_server_start(const char *tool, const char *module) {
    static char *envp[512];
    char *argv[8];
    int a = 0;
    argv[a++] = (char *)(uintptr_t)tool;
    argv[a++] = (char *)(uintptr_t) "-f";
    argv[a++] = (char *)(uintptr_t) "-C";
    argv[a++] = (char *)(uintptr_t) "-e";
    argv[a++] = (char *)(uintptr_t)module;
    argv[a] = NULL;
    int e = 0;
    for (char **ev = environ; ev && *ev && e < 511; ev++)
        if (strncmp(*ev, "LD_PRELOAD=", 11) != 0) envp[e++] = *ev;
    envp[e] = NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
    pid_t pid = sym_raw_fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        if (sym_raw_fork() != 0) _exit(0);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) dup2(devnull, 2);
        dup2(sv[1], 0); /* dup2 clears close-on-exec on the copies */
        dup2(sv[1], 1);
        /* nothing else of the program's: a server holding the write end of
         * one of its pipes would keep the reader from ever seeing its end */
#ifdef SYS_close_range
        if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
#endif
            for (int fd = 3; fd < 4096; fd++) close(fd);
        execve(tool, argv, envp);
        _exit(127);
    }
    close(sv[1]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return sv[0];
}

static void sym_server_stop(sym_server *sv) {
    if (sv->fd >= 0) close(sv->fd);
    sv->fd = -1;
}

/* The running server of module, started when needed; NULL when none can be. */
static sym_server *sym_server_get(const char *tool, const char *module) {
    pid_t self = getpid();
    size_t ml = strlen(module);
    if (ml >= sizeof sym_servers[0].module) return NULL;
    sym_server *sv = NULL;
    for (int i = 0; i < sym_nservers && !sv; i++)
        if (strcmp(sym_servers[i].module, module) == 0) sv = &sym_servers[i];
    if (sv && sv->owner != self) { /* inherited across fork: not ours to use */
        if (sv->fd >= 0) close(sv->fd);
        sv->fd = -1;
        sv->owner = self;
    }
    if (sv && sv->fd >= 0) return sv;
    if (!sv) {
        if (sym_nservers == SYM_SERVERS) return NULL;
        sv = &sym_servers[sym_nservers++];
        memcpy(sv->module, module, ml + 1);
        sv->fd = -1;
        sv->owner = self;
    }
    sv->fd = sym_server_start(tool, module);
    return sv->fd >= 0 ? sv : NULL;
}

/* Sends n addresses to module's server and reads its 2n answer lines into
 * out (NUL-terminated). Returns the bytes read, or -1 (the server is then
 * stopped; the next lookup starts another). */
static long sym_addr2line(const char *tool, const char *module, const uintptr_t *addrs, int n, char *out,
                          size_t outn) {
    static char req[SYM_BATCH * 24];
    if (!tool || !tool[0] || n <= 0 || outn == 0) return -1;
    if (n > SYM_BATCH) n = SYM_BATCH;
    sym_server *sv = sym_server_get(tool, module);
    if (!sv) return -1;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        sym_hex(req + len, addrs[i]);
        len += strlen(req + len);
        req[len++] = '\n';
    }
    for (size_t o = 0; o < len;) {
        ssize_t w = send(sv->fd, req + o, len - o, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            sym_server_stop(sv);
            return -1;
        }
        o += (size_t)w;
    }
    /* two lines per address; a server that stops answering for 10 s is dropped */
    size_t have = 0;
    int lines = 0;
    while (lines < 2 * n) {
        struct pollfd p = {sv->fd, POLLIN, 0};
        int pr = poll(&p, 1, 10000);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) {
            sym_server_stop(sv);
            return -1;
        }
        char tmp[4096];
        ssize_t r = read(sv->fd, tmp, sizeof tmp);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            sym_server_stop(sv);
            break;
        }
        for (ssize_t k = 0; k < r; k++) {
            if (tmp[k] == '\n') lines++;
            if (have + 1 < outn) out[have++] = tmp[k];
        }
    }
    out[have] = 0;
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
    if (!(flags & HK_OS_SYMBOLIZE_LINES) || !__atomic_load_n(&sym_a2l_looked, __ATOMIC_ACQUIRE)) return;
    sym_dwfl_load();
    if (sym_dw_ok) {
        int i = 0;
        while (i < n && sym_dwfl_resolve(&syms[i])) i++;
        if (i == n) return;
    }
    sym_a2l_find();
    if (!sym_a2l_path[0]) return;
    /* once per module: the first entry of each module collects the others */
    for (int i = 0; i < n; i++) {
        /* system libraries keep dladdr's name, as with libdw: addr2line on
         * libc with libc6-dbg installed takes some 40 ms per start */
        if (!syms[i].module || !syms[i].module[0] || sym_is_system_module(syms[i].module)) continue;
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

int hk_os_symbolize_lines_missing(void) {
    if (__atomic_load_n(&sym_a2l_looked, __ATOMIC_ACQUIRE) && (sym_dw_tried || !sym_dw_wanted) && !sym_dw_ok)
        sym_a2l_find();
    return __atomic_load_n(&sym_a2l_looked, __ATOMIC_ACQUIRE) && (sym_dw_tried || !sym_dw_wanted) &&
           !sym_dw_ok && !sym_a2l_path[0];
}

int hk_os_symbolize_lines_slow(void) {
    return sym_dw_wanted && sym_dw_tried && !sym_dw_ok &&
           __atomic_load_n(&sym_a2l_looked, __ATOMIC_ACQUIRE) && sym_a2l_path[0];
}

void *hk_os_find_function(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    return f;
}
