/*
 * src/os_posix_symbols.c - symbolization (hk_os_symbolize in src/os.h):
 * dladdr for the module and nearest exported symbol of each address, then
 * function names and file:line, in process with elfutils' libdwfl when it
 * can be loaded, else with `addr2line -f -C` once per module.
 *
 * libdwfl: its header is found at build time (__has_include; no header, no
 * libdw path) and the library (libdw.so.1) is loaded with dlopen at the
 * first symbolization with lines (HEAPKIT_NO_LIBDW=1 keeps addr2line), so neither libheapkit nor the preload depends on it
 * and a machine without it falls back to addr2line. One Dwfl session per
 * process, made at the first report: it reads the process's module list
 * once and each module's symbol table and DWARF line table once (its own
 * caches), so a report costs table lookups, not a process and a DWARF
 * parse. An address in a module loaded after that re-reads the list once.
 * libdw allocates with malloc: the guard's reports run where the preload
 * serves such re-entrant calls unguarded, without its lock.
 *
 * addr2line: no malloc and no stdio; it runs through the raw fork system
 * call, execve and a pipe, with LD_PRELOAD removed from its environment;
 * its output lands in a static buffer. The addr2line path is looked up
 * once (hk_os_symbolize_init), never at report time.
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

#if defined(__has_include)
#if __has_include(<elfutils/libdwfl.h>)
#include <elfutils/libdwfl.h>
#define SYM_HAVE_DWFL 1
#endif
#endif

static void sym_copy(char *dst, size_t cap, const char *src);

#ifdef SYM_HAVE_DWFL
/* ---- libdwfl, loaded at run time ---------------------------------------------------- */

typedef struct sym_dwfl_api {
    Dwfl *(*begin)(const Dwfl_Callbacks *);
    void (*report_begin)(Dwfl *);
    int (*proc_report)(Dwfl *, pid_t);
    int (*report_end)(Dwfl *, int (*)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *), void *);
    Dwfl_Module *(*addrmodule)(Dwfl *, Dwarf_Addr);
    const char *(*addrname)(Dwfl_Module *, GElf_Addr);
    Dwfl_Line *(*getsrc)(Dwfl_Module *, Dwarf_Addr);
    const char *(*lineinfo)(Dwfl_Line *, Dwarf_Addr *, int *, int *, Dwarf_Word *, Dwarf_Word *);
} sym_dwfl_api;

static sym_dwfl_api sym_dw;
static Dwfl_Callbacks sym_dw_cb;
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
    static const char *const names[10] = {"dwfl_begin",         "dwfl_report_begin",     "dwfl_linux_proc_report",
                                          "dwfl_report_end",    "dwfl_addrmodule",       "dwfl_module_addrname",
                                          "dwfl_module_getsrc", "dwfl_lineinfo",         "dwfl_linux_proc_find_elf",
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
    memcpy(&sym_dw_cb.find_elf, &f[8], sizeof f[8]);
    memcpy(&sym_dw_cb.find_debuginfo, &f[9], sizeof f[9]);
    sym_dw_ok = 1;
}

/* The system's own libraries (libc, libstdc++, ...): their symbol and line
 * tables come from separate, compressed debug files when installed
 * (libc6-dbg: some 200 million instructions of inflate for libc's lines,
 * 7 million to sort its full symbol table), and a report is about the
 * program's code. Frames there keep dladdr's exported name. */
static int sym_is_system_module(const char *path) {
    if (!path) return 0;
    return strncmp(path, "/lib/", 5) == 0 || strncmp(path, "/lib64/", 7) == 0 || strncmp(path, "/usr/lib/", 9) == 0 ||
           strncmp(path, "/usr/lib64/", 11) == 0;
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
#endif

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
#ifdef SYM_HAVE_DWFL
    /* not under ThreadSanitizer: it rightly flags libdw's malloc calls in
     * the fault handler (a report is written there) */
    sym_dw_wanted = getenv("HEAPKIT_NO_LIBDW") == NULL && !hk__tsan_enabled();
#endif
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
    if (!(flags & HK_OS_SYMBOLIZE_LINES) || !__atomic_load_n(&sym_a2l_looked, __ATOMIC_ACQUIRE)) return;
#ifdef SYM_HAVE_DWFL
    sym_dwfl_load();
    if (sym_dw_ok) {
        int i = 0;
        while (i < n && sym_dwfl_resolve(&syms[i])) i++;
        if (i == n) return;
    }
#endif
    if (!sym_a2l_path[0]) return;
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

void *hk_os_find_function(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    return f;
}
