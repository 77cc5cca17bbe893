/*
 * shim/record_malloc.c - libheapkit-record.so: records every allocation call
 * of an unmodified program into a heapkit trace (format: tools/trace.h) and
 * forwards the call to the real allocator. `heapkit record -- prog` sets it
 * up; by hand:
 *
 *   HEAPKIT_RECORD_OUT=app.hkt LD_PRELOAD=libheapkit-record.so prog ...
 *
 * Environment (declared in shim/options.h, listed by `heapkit env`):
 * HEAPKIT_RECORD_OUT (the trace; default heapkit.<pid>.hkt),
 * HEAPKIT_RECORD_PID (the process that writes OUT itself; any other process
 * - a program it runs, a forked child - writes OUT.<pid>; unset, the first
 * process to hold OUT's lock writes it and the others OUT.<pid>), HEAPKIT_RECORD_CHILDREN=0
 * (those other processes record nothing), HEAPKIT_RECORD_FRAMES (stack
 * depth, default 24, 0..64).
 *
 * Invariants:
 *  - The recorder never allocates: its tables and the trace itself live in
 *    memory from mmap; the trace file is mapped shared, so what a record
 *    writes is in the file even if the process then dies by any signal.
 *  - A trace file is written by one process at a time: the writer holds an
 *    exclusive flock on it from before it truncates the file until it
 *    exits or execs (O_CLOEXEC), so another program started meanwhile can
 *    never cut the file under the writer's mappings.
 *  - A record is visible to a reader only once whole: each thread writes
 *    its records into chunks of its own, and publishes the chunk's `used`
 *    byte count (release order) after each record.
 *  - The recorder keeps no table of blocks: records name block addresses,
 *    and the reader turns them into objects. A block's FREE (and a
 *    realloc's REALLOC_FROM) is stamped before the real call runs, its
 *    ALLOC after the real malloc returns; so in time order an address is
 *    always released before it is handed out again, across threads too.
 *  - Calls made while this thread is inside the recorder (the unwinder or
 *    the loader allocating, a signal handler) are forwarded unrecorded.
 *  - fork: the child leaves the parent's file alone; it records into
 *    OUT.<pid> from the fork on (its trace starts empty: blocks it
 *    inherited are unknown to the reader, which drops their frees), or
 *    nothing with HEAPKIT_RECORD_CHILDREN=0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "../tools/trace.h"
#include "options.h"
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "next_malloc.inc"
#include "record_tables.inc"

#define HK_EXPORT    __attribute__((visibility("default")))
#define REC_CHUNK    (64u * 1024u)
#define REC_SEG      (4u * 1024u * 1024u)
#define REC_PER_SEG  (REC_SEG / REC_CHUNK)
#define REC_MAX_SEGS 65536u /* 256 GiB of trace */

/* ---- process-wide state --------------------------------------------------------- */

static int g_on;           /* recording (set once the file is ready) */
static int g_init_state;   /* 0 not yet, 1 in progress, 2 done */
static unsigned g_gen;     /* bumped when a fork child starts over: stale thread states */
static int g_fd = -1;
static uint8_t *g_hdr;     /* the mapped header page */
static uint8_t *g_seg[REC_MAX_SEGS];
static uint32_t g_nchunks, g_closed;
static rt_spin g_chunk_lock;
static uint32_t g_nthreads;
static uint64_t g_start_ns;
static int g_frames = 24;
static char g_path[4096];
static uint32_t g_root_pid; /* HEAPKIT_RECORD_PID */
static int g_children = 1;
static int g_is_child; /* a fork child of a recorded process */

typedef struct rec_thread {
    uint8_t *chunk; /* the chunk header; payload follows */
    uint32_t used, cap;
    uint64_t last_ts;
    uint64_t last_addr; /* the previous block address in this chunk (0 at its start) */
    uint32_t index;
    unsigned gen;
    int busy;
} rec_thread;

static __thread rec_thread t_rec __attribute__((tls_model("initial-exec")));

/* ---- tiny libc-free helpers ------------------------------------------------------ */

static uint64_t rec_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Appends the decimal v to buf at *n (bounded). */
static void rec_append_num(char *buf, size_t cap, size_t *n, uint64_t v) {
    char tmp[24];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k > 0 && *n + 1 < cap) buf[(*n)++] = tmp[--k];
    buf[*n] = 0;
}

static void rec_append(char *buf, size_t cap, size_t *n, const char *s) {
    while (*s && *n + 1 < cap) buf[(*n)++] = *s++;
    buf[*n] = 0;
}

/* ---- the file --------------------------------------------------------------------- */

/* Opens the trace file and writes its header. 0 when recording is off. */
static int rec_open_file(void) {
    const char *out = hk_opt_get(HK_OPT_RECORD_OUT);
    uint32_t pid = (uint32_t)getpid();
    size_t n = 0;
    g_path[0] = 0;
    if (out && *out)
        rec_append(g_path, sizeof g_path, &n, out);
    else {
        rec_append(g_path, sizeof g_path, &n, "heapkit.");
        rec_append_num(g_path, sizeof g_path, &n, pid);
        rec_append(g_path, sizeof g_path, &n, ".hkt");
    }
    int own_name = g_is_child || (g_root_pid && g_root_pid != pid);
    if (own_name) {
        if (!g_children) return 0;
        rec_append(g_path, sizeof g_path, &n, ".");
        rec_append_num(g_path, sizeof g_path, &n, pid);
    }
    for (;;) {
        /* Truncated only once held: a file another live process records
         * into is never cut under its mappings. */
        g_fd = open(g_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (g_fd < 0) return 0;
        if (flock(g_fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK) break;
        close(g_fd);
        g_fd = -1;
        if (own_name || !g_children) return 0;
        own_name = 1; /* OUT is in use (HEAPKIT_RECORD_PID unset, another program has it): OUT.<pid> */
        rec_append(g_path, sizeof g_path, &n, ".");
        rec_append_num(g_path, sizeof g_path, &n, pid);
    }
    if (ftruncate(g_fd, 0) != 0 || ftruncate(g_fd, HKT_DATA_START) != 0) goto fail;
    g_hdr = mmap(NULL, HKT_DATA_START, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, 0);
    if (g_hdr == MAP_FAILED) goto fail;
    memcpy(g_hdr, HKT_MAGIC, 8);
    put32(g_hdr + 8, HKT_VERSION);
    put32(g_hdr + 12, HKT_HEADER_SIZE);
    put32(g_hdr + 16, pid);
    put32(g_hdr + 20, (uint32_t)getppid());
    put64(g_hdr + 24, g_start_ns);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    put64(g_hdr + 32, (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec);
    return 1;
fail:
    close(g_fd);
    g_fd = -1;
    g_hdr = NULL;
    return 0;
}

/* Gives the thread a fresh chunk. 0 when recording has stopped. */
static int rec_new_chunk(rec_thread *t) {
    rt_lock(&g_chunk_lock);
    uint32_t k = g_nchunks, s = k / REC_PER_SEG;
    if (g_closed || !g_on || s >= REC_MAX_SEGS) goto stop;
    if (!g_seg[s]) {
        off_t at = (off_t)HKT_DATA_START + (off_t)s * REC_SEG;
        if (ftruncate(g_fd, at + (off_t)REC_SEG) != 0) goto stop;
        void *m = mmap(NULL, REC_SEG, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, at);
        if (m == MAP_FAILED) goto stop;
        g_seg[s] = m;
    }
    uint8_t *c = g_seg[s] + (size_t)(k % REC_PER_SEG) * REC_CHUNK;
    g_nchunks++;
    if (!t->index) t->index = __atomic_add_fetch(&g_nthreads, 1, __ATOMIC_RELAXED);
    put32(c + 4, t->index);
    put32(c + 8, REC_CHUNK - HKT_CHUNK_HEADER);
    put32(c + 12, 0);
    __atomic_store_n((uint32_t *)c, HKT_CHUNK_MAGIC, __ATOMIC_RELEASE);
    rt_unlock(&g_chunk_lock);
    t->chunk = c;
    t->used = 0;
    t->cap = REC_CHUNK - HKT_CHUNK_HEADER;
    t->last_ts = 0;
    t->last_addr = 0;
    return 1;
stop:
    rt_unlock(&g_chunk_lock);
    t->chunk = NULL;
    return 0;
}

/* Room for a record of up to `need` bytes: a pointer to write it at. */
static uint8_t *rec_reserve(rec_thread *t, uint32_t need) {
    if (!t->chunk || t->cap - t->used < need)
        if (!rec_new_chunk(t)) return NULL;
    return t->chunk + HKT_CHUNK_HEADER + t->used;
}

/* Publishes the record that ends at `end`. */
static void rec_commit(rec_thread *t, const uint8_t *end) {
    t->used = (uint32_t)(end - (t->chunk + HKT_CHUNK_HEADER));
    __atomic_store_n((uint32_t *)(t->chunk + 12), t->used, __ATOMIC_RELEASE);
}

static uint8_t *rec_put_dt(rec_thread *t, uint8_t *p) {
    uint64_t now = rec_now() - g_start_ns;
    uint64_t dt = now > t->last_ts ? now - t->last_ts : 0;
    t->last_ts += dt;
    return hkt_put_varint(p, dt);
}

/* ---- module maps ---------------------------------------------------------------------- */

#define MAPS_MAX 2048
static struct {
    uintptr_t start, end;
} g_maps[MAPS_MAX];
static int g_nmaps, g_maps_reads;

static int maps_covers(uintptr_t a) {
    int lo = 0, hi = g_nmaps;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (g_maps[mid].end <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < g_nmaps && g_maps[lo].start <= a;
}

static uint64_t maps_hex(const char **s, const char *e) {
    uint64_t v = 0;
    for (; *s < e; (*s)++) {
        char c = **s;
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
        if (d > 15) break;
        v = v * 16 + d;
    }
    return v;
}

/* One line of /proc/self/maps: an executable mapping of a file becomes a
 * MAPS record (one entry each) and a known range. */
static void maps_line(rec_thread *t, const char *l, const char *e) {
    const char *s = l;
    uint64_t start = maps_hex(&s, e);
    if (s >= e || *s != '-') return;
    s++;
    uint64_t end = maps_hex(&s, e);
    if (e - s < 5 || s[3] != 'x') return;
    s += 5;
    while (s < e && *s == ' ') s++;
    uint64_t off = maps_hex(&s, e);
    for (int field = 0; field < 2; field++) { /* dev, inode */
        while (s < e && *s == ' ') s++;
        while (s < e && *s != ' ') s++;
    }
    while (s < e && *s == ' ') s++;
    size_t plen = (size_t)(e - s);
    if (plen == 0 || plen > 1024 || g_nmaps >= MAPS_MAX) return;
    g_maps[g_nmaps].start = (uintptr_t)start;
    g_maps[g_nmaps].end = (uintptr_t)end;
    g_nmaps++;
    uint8_t *p = rec_reserve(t, (uint32_t)(plen + 64));
    if (!p) return;
    uint8_t *w = p;
    *w++ = HKT_R_MAPS;
    w = hkt_put_varint(w, 1);
    w = hkt_put_varint(w, start);
    w = hkt_put_varint(w, end);
    w = hkt_put_varint(w, off);
    w = hkt_put_varint(w, plen);
    memcpy(w, s, plen);
    rec_commit(t, w + plen);
}

static char g_maps_buf[65536];

/* Re-reads /proc/self/maps into the trace (under g_st_lock). */
static void maps_snapshot(rec_thread *t) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    g_nmaps = 0;
    g_maps_reads++;
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, g_maps_buf + have, sizeof g_maps_buf - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        have += (size_t)r;
        size_t from = 0;
        for (size_t i = 0; i < have; i++)
            if (g_maps_buf[i] == '\n') {
                maps_line(t, g_maps_buf + from, g_maps_buf + i);
                from = i + 1;
            }
        memmove(g_maps_buf, g_maps_buf + from, have - from);
        have -= from;
        if (have == sizeof g_maps_buf) have = 0; /* an absurd line: drop it */
    }
    close(fd);
}

/* ---- stacks ------------------------------------------------------------------------------ */

/* The number of the stack, recording it (and new modules) the first time. */
static uint32_t rec_stack(rec_thread *t, void **f, int n) {
    if (n <= 0 || !g_st) return 0;
    uint64_t h = st_hash(f, n);
    st_entry *slot;
    uint32_t id = st_find(f, n, h, &slot);
    if (id || !slot) return id;
    rt_lock(&g_st_lock);
    id = st_find(f, n, h, &slot); /* again, under the lock */
    if (id || !slot || g_st_nframes + (uint64_t)n > ST_MAX_FRAMES) {
        rt_unlock(&g_st_lock);
        return id;
    }
    int uncovered = 0;
    for (int i = 0; i < n; i++) uncovered |= !maps_covers((uintptr_t)f[i]);
    if (uncovered && (g_maps_reads < 64 || g_st_next_id % 1024 == 0)) maps_snapshot(t);
    id = ++g_st_next_id;
    uint8_t *p = rec_reserve(t, 16 + 10u * (uint32_t)n);
    if (p) {
        uint8_t *w = p;
        *w++ = HKT_R_STACK;
        w = hkt_put_varint(w, id);
        w = hkt_put_varint(w, (uint64_t)n);
        w = hkt_put_varint(w, (uint64_t)(uintptr_t)f[0]);
        for (int i = 1; i < n; i++) w = hkt_put_varint(w, hkt_zigzag((int64_t)((uintptr_t)f[i] - (uintptr_t)f[i - 1])));
        rec_commit(t, w);
    }
    for (int i = 0; i < n; i++) g_st_frames[g_st_nframes + (uint64_t)i] = (uintptr_t)f[i];
    slot->first = g_st_nframes;
    slot->n = (uint32_t)n;
    slot->id = id;
    g_st_nframes += (uint64_t)n;
    __atomic_store_n(&slot->hash, h, __ATOMIC_RELEASE);
    rt_unlock(&g_st_lock);
    return id;
}

/* ---- start-up, fork, exit ------------------------------------------------------------------- */

static void rec_cmdline(rec_thread *t) {
    static char buf[8192];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n <= 0) return;
    if (buf[n - 1] == 0) n--;
    uint8_t *p = rec_reserve(t, (uint32_t)n + 16);
    if (!p) return;
    uint8_t *w = p;
    *w++ = HKT_R_CMDLINE;
    w = hkt_put_varint(w, (uint64_t)n);
    memcpy(w, buf, (size_t)n);
    rec_commit(t, w + n);
}

static void rec_atfork_child(void);

/* Called with t->busy set. Starts recording in this process. */
static void rec_start(rec_thread *t) {
    g_start_ns = rec_now();
    const char *pid = hk_opt_get(HK_OPT_RECORD_PID);
    g_root_pid = pid ? (uint32_t)strtoul(pid, NULL, 10) : 0;
    g_children = hk_opt_bool(HK_OPT_RECORD_CHILDREN);
    size_t fr;
    if (hk_opt_parse_number(hk_opt_get(HK_OPT_RECORD_FRAMES), &fr))
        g_frames = fr > HKT_MAX_FRAMES ? HKT_MAX_FRAMES : (int)fr;
    if (!st_init() || !rec_open_file()) return;
    __atomic_store_n(&g_on, 1, __ATOMIC_RELEASE);
    t->gen = g_gen;
    rec_cmdline(t);
}

static void rec_init_once(rec_thread *t) {
    int expect = 0;
    if (__atomic_compare_exchange_n(&g_init_state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        rec_start(t);
        pthread_atfork(NULL, NULL, rec_atfork_child); /* may allocate: t->busy is set */
        __atomic_store_n(&g_init_state, 2, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&g_init_state, __ATOMIC_ACQUIRE) != 2) __builtin_ia32_pause();
}

/* The child of a fork: a file of its own (or nothing), empty tables. */
static void rec_atfork_child(void) {
    rec_thread *t = &t_rec;
    int was_busy = t->busy;
    t->busy = 1;
    g_on = 0;
    g_gen++;
    for (uint32_t s = 0; s < REC_MAX_SEGS && g_seg[s]; s++) {
        munmap(g_seg[s], REC_SEG);
        g_seg[s] = NULL;
    }
    if (g_hdr) munmap(g_hdr, HKT_DATA_START);
    g_hdr = NULL;
    if (g_fd >= 0) close(g_fd);
    g_fd = -1;
    g_nchunks = 0;
    g_closed = 0;
    g_chunk_lock.v = 0;
    g_nthreads = 0;
    g_nmaps = 0;
    g_maps_reads = 0;
    st_reset();
    memset(t, 0, sizeof *t);
    t->busy = 1;
    g_is_child = 1;
    if (g_children) rec_start(t);
    t->busy = was_busy;
}

__attribute__((destructor)) static void rec_close(void) {
    if (!__atomic_load_n(&g_on, __ATOMIC_ACQUIRE)) return;
    rt_lock(&g_chunk_lock);
    g_closed = 1;
    put32(g_hdr + 40, HKT_F_CLOSED);
    /* the file ends with the last chunk handed out; no thread writes past it */
    if (ftruncate(g_fd, (off_t)HKT_DATA_START + (off_t)g_nchunks * REC_CHUNK) != 0) {
    }
    rt_unlock(&g_chunk_lock);
}

/* ---- recording one call ------------------------------------------------------------------------ */

/* Enters the recorder: the thread's state, or NULL when this call is not
 * recorded (recursion, recording off). */
static inline rec_thread *rec_enter(void) {
    rec_thread *t = &t_rec;
    if (t->busy) return NULL;
    t->busy = 1;
    if (__builtin_expect(__atomic_load_n(&g_init_state, __ATOMIC_ACQUIRE) != 2, 0)) rec_init_once(t);
    if (!__atomic_load_n(&g_on, __ATOMIC_ACQUIRE)) {
        t->busy = 0;
        return NULL;
    }
    if (__builtin_expect(t->gen != g_gen, 0)) { /* a forked child starting over */
        unsigned gen = g_gen;
        memset(t, 0, sizeof *t);
        t->gen = gen;
        t->busy = 1;
    }
    if (__builtin_expect(!t->index, 0)) {
        uint8_t *p = rec_reserve(t, 32);
        if (p) {
            uint8_t *w = p;
            *w++ = HKT_R_THREAD;
            w = rec_put_dt(t, w);
            w = hkt_put_varint(w, (uint64_t)syscall(SYS_gettid));
            rec_commit(t, w);
        }
    }
    return t;
}

static inline void rec_leave(rec_thread *t) { t->busy = 0; }

/* A block address, as the difference from the previous one in this chunk. */
static inline uint8_t *rec_put_addr(rec_thread *t, uint8_t *w, const void *p) {
    uintptr_t a = (uintptr_t)p;
    w = hkt_put_varint(w, hkt_zigzag((int64_t)(a - t->last_addr)));
    t->last_addr = a;
    return w;
}

/* frames[0] is a pc in the exported call, frames[1] the program's return address */
#define REC_CAPTURE(f, n) int n = g_frames ? hk_os_stack_capture((f), g_frames + 1, 0, 0) : 0

static void rec_alloc(rec_thread *t, unsigned fn, void *p, size_t size, size_t align, void **f, int nf) {
    uint32_t sid = nf > 1 ? rec_stack(t, f + 1, nf - 1) : 0;
    uint8_t *w = rec_reserve(t, 64);
    if (!w) return;
    *w++ = (uint8_t)(HKT_R_ALLOC | fn << 4);
    w = rec_put_dt(t, w);
    w = rec_put_addr(t, w, p);
    w = hkt_put_varint(w, size);
    w = hkt_put_varint(w, sid);
    if (hkt_fn_has_align(fn)) w = hkt_put_varint(w, align);
    rec_commit(t, w);
}

/* FREE, or REALLOC_FROM: the block p, stamped before the real call runs. */
static void rec_release(rec_thread *t, unsigned kind, const void *p) {
    uint8_t *w = rec_reserve(t, 32);
    if (!w) return;
    *w++ = (uint8_t)kind;
    w = rec_put_dt(t, w);
    w = rec_put_addr(t, w, p);
    rec_commit(t, w);
}

/* The end of a realloc: how (HKT_RA_*), and the block q unless it failed or freed. */
static void rec_realloc(rec_thread *t, unsigned how, void *q, size_t size, void **f, int nf) {
    uint32_t sid = nf > 1 ? rec_stack(t, f + 1, nf - 1) : 0;
    uint8_t *w = rec_reserve(t, 64);
    if (!w) return;
    *w++ = (uint8_t)(HKT_R_REALLOC | how << 4);
    w = rec_put_dt(t, w);
    if (how <= HKT_RA_MOVED) w = rec_put_addr(t, w, q);
    w = hkt_put_varint(w, size);
    w = hkt_put_varint(w, sid);
    rec_commit(t, w);
}

/* ---- the exported calls ---------------------------------------------------------------------------- */

#define REC_ALLOC_CALL(fn, size, align, expr)                                                                \
    void *rp_ = (expr);                                                                                        \
    if (rp_) {                                                                                                 \
        rec_thread *t = rec_enter();                                                                         \
        if (t) {                                                                                             \
            void *f[HKT_MAX_FRAMES + 1];                                                                     \
            REC_CAPTURE(f, nf);                                                                              \
            rec_alloc(t, fn, rp_, size, align, f, nf);                                                         \
            rec_leave(t);                                                                                    \
        }                                                                                                    \
    }                                                                                                        \
    return rp_

HK_EXPORT void *malloc(size_t n) {
    if (!next_ready()) return next_boot_alloc(n);
    REC_ALLOC_CALL(HKT_FN_MALLOC, n, 0, g_next.malloc(n));
}

HK_EXPORT void *calloc(size_t c, size_t n) {
    if (!next_ready()) {
        size_t b;
        return __builtin_mul_overflow(c, n, &b) ? NULL : next_boot_alloc(b);
    }
    REC_ALLOC_CALL(HKT_FN_CALLOC, c * n, 0, g_next.calloc(c, n));
}

HK_EXPORT void *memalign(size_t a, size_t n) {
    if (!next_ready()) return NULL;
    REC_ALLOC_CALL(HKT_FN_MEMALIGN, n, a, g_next.memalign(a, n));
}

HK_EXPORT void *aligned_alloc(size_t a, size_t n) {
    if (!next_ready()) return NULL;
    REC_ALLOC_CALL(HKT_FN_MEMALIGN, n, a, g_next.aligned_alloc(a, n));
}

HK_EXPORT void *valloc(size_t n) {
    if (!next_ready()) return NULL;
    REC_ALLOC_CALL(HKT_FN_VALLOC, n, (size_t)sysconf(_SC_PAGESIZE), g_next.valloc(n));
}

HK_EXPORT void *pvalloc(size_t n) {
    if (!next_ready()) return NULL;
    REC_ALLOC_CALL(HKT_FN_VALLOC, n, (size_t)sysconf(_SC_PAGESIZE), g_next.pvalloc(n));
}

HK_EXPORT int posix_memalign(void **out, size_t a, size_t n) {
    if (!next_ready()) return ENOMEM;
    int rc = g_next.posix_memalign(out, a, n);
    if (rc == 0 && *out) {
        rec_thread *t = rec_enter();
        if (t) {
            void *f[HKT_MAX_FRAMES + 1];
            REC_CAPTURE(f, nf);
            rec_alloc(t, HKT_FN_MEMALIGN, *out, n, a, f, nf);
            rec_leave(t);
        }
    }
    return rc;
}

HK_EXPORT void free(void *p) {
    if (!p || next_is_boot(p)) return;
    if (!next_ready()) return;
    rec_thread *t = rec_enter();
    if (t) {
        rec_release(t, HKT_R_FREE, p);
        rec_leave(t);
    }
    g_next.free(p);
}

HK_EXPORT void *realloc(void *p, size_t n) {
    if (!next_ready()) return NULL;
    if (p && next_is_boot(p)) { /* from the bootstrap buffer: move it out */
        void *q = malloc(n);
        if (q) {
            size_t room = (size_t)(g_next_boot + sizeof g_next_boot - (unsigned char *)p);
            memcpy(q, p, n < room ? n : room);
        }
        return q;
    }
    if (!p) {
        REC_ALLOC_CALL(HKT_FN_REALLOC, n, 0, g_next.realloc(NULL, n));
    }
    rec_thread *t = rec_enter();
    if (t) {
        rec_release(t, HKT_R_REALLOC_FROM, p);
        rec_leave(t);
    }
    void *q = g_next.realloc(p, n);
    if (!t) return q;
    t = rec_enter();
    if (!t) return q;
    if (q) {
        void *f[HKT_MAX_FRAMES + 1];
        REC_CAPTURE(f, nf);
        rec_realloc(t, q == p ? HKT_RA_INPLACE : HKT_RA_MOVED, q, n, f, nf);
    } else {
        /* glibc: realloc(p, 0) frees p; any other NULL leaves p as it was */
        rec_realloc(t, n == 0 ? HKT_RA_FREED : HKT_RA_FAILED, NULL, n, NULL, 0);
    }
    rec_leave(t);
    return q;
}

HK_EXPORT void *reallocarray(void *p, size_t c, size_t n) {
    size_t b;
    if (__builtin_mul_overflow(c, n, &b)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, b);
}

HK_EXPORT size_t malloc_usable_size(void *p) {
    if (!p || next_is_boot(p) || !next_ready()) return 0;
    return g_next.usable_size ? g_next.usable_size(p) : 0;
}
