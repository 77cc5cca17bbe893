/*
 * tools/symbols.c - names for trace addresses (tools/symbols.h).
 *
 * Invariant: s->e is sorted by addr with no duplicates, and every address
 * passed to hks_resolve has an entry (a module offset when nothing better
 * is known), so hks_find never fails for those.
 */
#include "symbols.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* 1 when the module is a fixed-address executable (addresses used as they are). */
static int is_exec(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    Elf64_Ehdr h;
    int r = fread(&h, sizeof h, 1, f) == 1 && memcmp(h.e_ident, ELFMAG, SELFMAG) == 0 && h.e_type == ET_EXEC;
    fclose(f);
    return r;
}

static int runtime_lib(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5) || !strncmp(b, "libstdc++", 9) ||
           !strncmp(b, "ld-linux", 8) || !strncmp(b, "libheapkit-record", 17) || !strncmp(b, "libgcc_s", 8);
}

static void run_addr2line(hks_entry **batch, size_t n, const char *module, uint64_t base) {
    if (access("/usr/bin/addr2line", X_OK) != 0 && system("command -v addr2line >/dev/null 2>&1") != 0) return;
    size_t cap = strlen(module) * 2 + 64 + n * 20;
    char *cmd = malloc(cap);
    if (!cmd) return;
    size_t k = (size_t)snprintf(cmd, cap, "addr2line -f -C -e '");
    for (const char *p = module; *p && k + 8 < cap; p++) {
        if (*p == '\'') {
            memcpy(cmd + k, "'\\''", 4);
            k += 4;
        } else {
            cmd[k++] = *p;
        }
    }
    k += (size_t)snprintf(cmd + k, cap - k, "'");
    for (size_t i = 0; i < n && k + 24 < cap; i++)
        k += (size_t)snprintf(cmd + k, cap - k, " 0x%llx", (unsigned long long)(batch[i]->addr - 1 - base));
    snprintf(cmd + k, cap - k, " 2>/dev/null");
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p) return;
    char func[1024], where[1024];
    for (size_t i = 0; i < n; i++) {
        if (!fgets(func, sizeof func, p) || !fgets(where, sizeof where, p)) break;
        func[strcspn(func, "\n")] = 0;
        where[strcspn(where, "\n")] = 0;
        if (strcmp(func, "??") != 0) snprintf(batch[i]->func, sizeof batch[i]->func, "%.159s", func);
        if (strncmp(where, "??", 2) != 0) {
            const char *disc = strstr(where, " (discriminator");
            snprintf(batch[i]->where, sizeof batch[i]->where, "%.*s", disc ? (int)(disc - where) : (int)strlen(where),
                     where);
        }
    }
    pclose(p);
}

void hks_resolve(hks *s, const hkt_trace *t, const uint64_t *addrs, size_t n) {
    memset(s, 0, sizeof *s);
    uint64_t *a = malloc((n ? n : 1) * sizeof *a);
    if (!a) return;
    memcpy(a, addrs, n * sizeof *a);
    qsort(a, n, sizeof *a, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || a[m - 1] != a[i]) a[m++] = a[i];
    s->e = calloc(m ? m : 1, sizeof *s->e);
    if (!s->e) {
        free(a);
        return;
    }
    s->n = m;
    for (size_t i = 0; i < m; i++) {
        hks_entry *e = &s->e[i];
        e->addr = a[i];
        const hkt_module *mod = hkt_find_module(t, a[i]);
        if (mod) {
            const char *b = strrchr(mod->path, '/');
            snprintf(e->func, sizeof e->func, "%s+0x%llx", b ? b + 1 : mod->path,
                     (unsigned long long)(a[i] - mod->start + mod->offset));
            snprintf(e->where, sizeof e->where, "%s", mod->path);
            e->lib = runtime_lib(mod->path);
        } else {
            snprintf(e->func, sizeof e->func, "0x%llx", (unsigned long long)a[i]);
        }
    }
    free(a);
    /* addr2line, module by module */
    hks_entry **batch = malloc(256 * sizeof *batch);
    if (!batch) return;
    for (uint32_t mi = 0; mi < t->nmodules; mi++) {
        const hkt_module *mod = &t->modules[mi];
        if (mod->path[0] != '/') continue;
        uint64_t base = is_exec(mod->path) ? 0 : mod->start - mod->offset;
        size_t nb = 0;
        for (size_t i = 0; i < s->n; i++) {
            if (s->e[i].addr < mod->start || s->e[i].addr >= mod->end) continue;
            if (hkt_find_module(t, s->e[i].addr) != mod) continue;
            batch[nb++] = &s->e[i];
            if (nb == 256) {
                run_addr2line(batch, nb, mod->path, base);
                nb = 0;
            }
        }
        if (nb) run_addr2line(batch, nb, mod->path, base);
    }
    free(batch);
}

const hks_entry *hks_find(const hks *s, uint64_t addr) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->e[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n && s->e[lo].addr == addr ? &s->e[lo] : NULL;
}

void hks_free(hks *s) {
    free(s->e);
    memset(s, 0, sizeof *s);
}

const hks_entry *hks_site(const hks *s, const hkt_trace *t, uint32_t stack) {
    if (stack == 0 || stack >= t->nstacks || t->stacks[stack].n == 0) return NULL;
    const hkt_stack *st = &t->stacks[stack];
    for (uint32_t i = 0; i < st->n; i++) {
        const hks_entry *e = hks_find(s, st->frames[i]);
        if (e && !e->lib) return e;
    }
    return hks_find(s, st->frames[0]);
}
