/*
 * tools/tool_util.c - what the trace commands share: finding heapkit's
 * libraries, checking that a program can take a preload library, running a
 * program with one and waiting for it.
 *
 * Invariant: nothing here changes this process's environment; a child gets
 * its variables between fork and exec.
 */
#include "commands.h"

#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef HEAPKIT_INSTALL_LIBDIR
#define HEAPKIT_INSTALL_LIBDIR "/usr/local/lib"
#endif

int hk_tool_find_lib(const char *name, const char *env, char *out, size_t n) {
    const char *e = env ? getenv(env) : NULL;
    if (e && *e) {
        snprintf(out, n, "%s", e);
        return access(out, R_OK) == 0;
    }
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        static const char *const rel[] = {"", "../lib/", "../lib64/"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            int w = snprintf(out, n, "%s/%s%s", self, rel[i], name);
            if (w > 0 && (size_t)w < n && access(out, R_OK) == 0) return 1;
        }
    }
    snprintf(out, n, "%s/%s", HEAPKIT_INSTALL_LIBDIR, name);
    return access(out, R_OK) == 0;
}

static int find_in_path(const char *prog, char *out, size_t n) {
    if (strchr(prog, '/')) {
        snprintf(out, n, "%s", prog);
        return access(out, F_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *s = path; *s;) {
        const char *e = strchr(s, ':');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        int w = snprintf(out, n, "%.*s/%s", (int)len, s, prog);
        struct stat st;
        if (w > 0 && (size_t)w < n && stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 1;
        if (!e) break;
        s = e + 1;
    }
    return 0;
}

/* 1: dynamically linked ELF, 0: static ELF, -1: not ELF, -2: unreadable.
 * For a script, *interp gets its interpreter. */
static int elf_kind(const char *path, char *interp, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return -2;
    unsigned char h[256];
    size_t got = fread(h, 1, sizeof h, f);
    interp[0] = 0;
    if (got >= 2 && h[0] == '#' && h[1] == '!') {
        size_t i = 2, k = 0;
        while (i < got && (h[i] == ' ' || h[i] == '\t')) i++;
        while (i < got && h[i] != ' ' && h[i] != '\t' && h[i] != '\n' && k + 1 < n) interp[k++] = (char)h[i++];
        interp[k] = 0;
        fclose(f);
        return -1;
    }
    int kind = -1;
    if (got >= sizeof(Elf64_Ehdr) && memcmp(h, ELFMAG, SELFMAG) == 0 && h[EI_CLASS] == ELFCLASS64) {
        Elf64_Ehdr eh;
        memcpy(&eh, h, sizeof eh);
        kind = 0;
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            if (fseek(f, (long)(eh.e_phoff + (Elf64_Off)i * eh.e_phentsize), SEEK_SET) != 0 ||
                fread(&ph, sizeof ph, 1, f) != 1)
                break;
            if (ph.p_type == PT_INTERP || ph.p_type == PT_DYNAMIC) kind = 1;
        }
    } else if (got >= sizeof(Elf32_Ehdr) && memcmp(h, ELFMAG, SELFMAG) == 0) {
        kind = 1; /* 32-bit: the loader will say whether the library fits */
    }
    fclose(f);
    return kind;
}

int hk_tool_check_program(const char *cmd, const char *prog, char *out, size_t n) {
    if (!find_in_path(prog, out, n)) {
        fprintf(stderr, "heapkit %s: no program '%s'%s\n", cmd, prog,
                strchr(prog, '/') ? "" : " in PATH");
        return 0;
    }
    if (access(out, X_OK) != 0) {
        fprintf(stderr, "heapkit %s: %s is not executable\n", cmd, out);
        return 0;
    }
    char interp[PATH_MAX];
    int k = elf_kind(out, interp, sizeof interp);
    if (k == -1 && interp[0]) {
        char ipath[PATH_MAX];
        if (!find_in_path(interp, ipath, sizeof ipath)) {
            fprintf(stderr, "heapkit %s: %s is a script whose interpreter %s does not exist\n", cmd, out, interp);
            return 0;
        }
        k = elf_kind(ipath, interp, sizeof interp);
        if (k == 0) {
            fprintf(stderr,
                    "heapkit %s: %s runs under %s, which is statically linked: a preload library cannot "
                    "see its allocations\n",
                    cmd, out, ipath);
            return 0;
        }
        return 1;
    }
    if (k == -2) {
        fprintf(stderr, "heapkit %s: cannot read %s: %s\n", cmd, out, strerror(errno));
        return 0;
    }
    if (k == -1) {
        fprintf(stderr, "heapkit %s: %s is not an ELF program or a script\n", cmd, out);
        return 0;
    }
    if (k == 0) {
        fprintf(stderr,
                "heapkit %s: %s is statically linked: a preload library cannot see its allocations\n", cmd,
                out);
        return 0;
    }
    return 1;
}

int hk_tool_run(const char *cmd, const char *path, char **argv, const char *libs, const char *const *env) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "heapkit %s: fork: %s\n", cmd, strerror(errno));
        return 127;
    }
    if (pid == 0) {
        const char *old = getenv("LD_PRELOAD");
        if (libs && *libs) {
            if (old && *old) {
                size_t len = strlen(libs) + strlen(old) + 2;
                char *v = malloc(len);
                if (!v) _exit(127);
                snprintf(v, len, "%s:%s", libs, old);
                setenv("LD_PRELOAD", v, 1);
            } else {
                setenv("LD_PRELOAD", libs, 1);
            }
        }
        for (size_t i = 0; env && env[i]; i++) {
            const char *eq = strchr(env[i], '=');
            if (!eq) continue;
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
            char val[32];
            const char *v = eq + 1;
            if (strcmp(v, "@pid") == 0) {
                snprintf(val, sizeof val, "%ld", (long)getpid());
                v = val;
            }
            setenv(name, v, 1);
        }
        execv(path, argv);
        fprintf(stderr, "heapkit %s: cannot run %s: %s\n", cmd, path, strerror(errno));
        _exit(127);
    }
    /* like system(): the terminal's signals are for the program */
    struct sigaction ign, old_int, old_quit;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 127;
}
