/*
 * bench/suite_zone.c - the zone against glibc, mimalloc, jemalloc, tcmalloc
 * and a Quake-style rover first-fit zone (bench/lib_zone_rover.c).
 *
 *  frame       a game-frame trace (frame temporaries, level-lifetime and
 *              cached blocks, 16 B - 64 KiB, a few reallocs): ns per operation
 *  level       level load/unload: hk_zone_free_tags against freeing each block
 *  latency     per-operation time distribution (p99, p99.99, max) at heap
 *              sizes from 1 MiB to 1 GiB, raw and noise-filtered (below)
 *  fragment    peak footprint / peak live bytes on the frame trace
 *
 * "zone-noruns" (frame workload) is the zone created with HK_ZONE_NO_RUNS:
 * every block from its TLSF core, without the small-block runs.
 * "zone+prefault" (latency workload) is the zone created with
 * HK_ZONE_PREFAULT: the memory of each growth is faulted in when the zone
 * takes it.
 *
 * Ratios are recorded as ratio_vs_X = X's figure / the zone's figure (so > 1
 * means the zone is faster, or uses less).
 *
 * The subjects and the frame trace are in bench/zone_common.c, the latency
 * workload in bench/zone_latency.c (both share bench/zone_bench.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "zone_bench.h"
#include "proc_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SUITE "zone"

static void workload_frame(hkb_ctx *ctx, const trace *t) {
    hkb_section(SUITE, "frame", "game-frame trace: ns per operation (median), ratio = X / zone");
    subject subj[10];
    int ns = subjects(subj, SUBJ_SET_FRAME);
    void **slots = calloc(t->nslots, sizeof(void *));
    double res[10], cres[10], v[10][32], cv[10][32], fv[10][32];
    int warm[10];
    subject_state st[10];
    int reps = ctx->reps < 32 ? ctx->reps : 32;
    /* One instance per allocator, warmed up (every allocator then runs on
     * memory it already has from the OS). The
     * repetitions are interleaved (rep k of every allocator, then rep k+1),
     * so that a change in the machine's load during the run (other jobs)
     * falls on all allocators alike instead of on whichever runs at that
     * time; each timed replay follows an untimed one of the same allocator,
     * so it starts with that allocator's data in the caches, as when the
     * replays ran back to back. Every replay ends with no live block, so the
     * instances can coexist. */
    for (int s = 0; s < ns; s++) {
        subject_open(&subj[s], (size_t)1 << 30);
        /* warm up until a replay takes no page fault (at most 16 replays):
         * some allocators settle on their footprint only after several */
        long f;
        warm[s] = 0;
        do {
            long f0 = lat_faults();
            trace_replay(&subj[s].a, t, slots, NULL);
            f = lat_faults() - f0;
            warm[s]++;
        } while (f > 0 && warm[s] < 16);
        st[s] = subject_save();
    }
    for (int k = 0; k < reps; k++)
        for (int s = 0; s < ns; s++) {
            subject_restore(st[s]);
            trace_replay(&subj[s].a, t, slots, NULL);
            long f0 = lat_faults();
            v[s][k] = trace_replay(&subj[s].a, t, slots, NULL);
            fv[s][k] = (double)(lat_faults() - f0);
            cv[s][k] = g_replay_cpu;
        }
    for (int s = 0; s < ns; s++) {
        subject_restore(st[s]);
        subject_close(&subj[s]);
        res[s] = hkb_median(v[s], reps);
        cres[s] = hkb_median(cv[s], reps);
        hkb_record(SUITE, "frame", subj[s].a.name, "ns_per_op", res[s], "ns");
        hkb_record(SUITE, "frame", subj[s].a.name, "cpu_ns_per_op", cres[s],
                   "ns (thread CPU time: without waits for a core)");
        hkb_record(SUITE, "frame", subj[s].a.name, "warmup_replays", warm[s],
                   "replays until one took no page fault (max 16)");
        hkb_record(SUITE, "frame", subj[s].a.name, "faults_per_replay", hkb_median(fv[s], reps),
                   "page faults in a timed replay (median)");
    }
    for (int s = 1; s < ns; s++) {
        char m[64];
        snprintf(m, sizeof m, "ratio_vs_%s", subj[s].a.name);
        hkb_record(SUITE, "frame", "zone", m, res[s] / res[0], "x (X time / zone time)");
        snprintf(m, sizeof m, "cpu_ratio_vs_%s", subj[s].a.name);
        hkb_record(SUITE, "frame", "zone", m, cres[s] / cres[0], "x (X CPU time / zone CPU time)");
    }
    /* the zone without its small-block runs (every block from the TLSF core) against the peers */
    for (int f = 0; f < ns; f++) {
        if (subj[f].kind != SUBJ_ZONE_NR) continue;
        for (int s = 0; s < ns; s++) {
            if (subj[s].kind != SUBJ_PEER && subj[s].kind != SUBJ_ROVER) continue;
            char m[64];
            snprintf(m, sizeof m, "ratio_vs_%s", subj[s].a.name);
            hkb_record(SUITE, "frame", "zone-noruns", m, res[s] / res[f], "x (X time / zone-noruns time)");
            snprintf(m, sizeof m, "cpu_ratio_vs_%s", subj[s].a.name);
            hkb_record(SUITE, "frame", "zone-noruns", m, cres[s] / cres[f], "x (CPU time)");
        }
    }
    hkb_skip_missing(SUITE, "frame");
    free(slots);
}

/* ---- level load / unload ------------------------------------------------------ */

static void workload_level(hkb_ctx *ctx) {
    hkb_section(SUITE, "level", "level unload: time per unload (median), ratio = X / zone free_tags");
    int n = ctx->quick ? 5000 : 20000;
    void **lv = malloc((size_t)n * sizeof(void *)), **st = malloc((size_t)n * sizeof(void *));
    size_t *sizes = malloc((size_t)n * sizeof(size_t));
    uint64_t r = ctx->seed ^ 0x1e7e1;
    for (int i = 0; i < n; i++) sizes[i] = (size_t)rnd_logu(&r, 16, 16384);
    subject subj[10];
    int nsub = subjects(subj, SUBJ_SET_PLAIN);
    /* rows: zone free_tags, zone free each, peers free each, rover Z_FreeTags walk, rover free each */
    double tags_ns = 0;
    for (int mode = 0; mode < nsub + 2; mode++) {
        const subject *s;
        int use_tags;
        if (mode == 0) {
            s = &subj[0];
            use_tags = 1;
        } else if (mode <= nsub) {
            s = &subj[mode - 1];
            use_tags = 0;
        } else {
            s = &subj[nsub - 1];
            use_tags = 1;
        }
        double v[32];
        int reps = ctx->reps < 32 ? ctx->reps : 32;
        hk_stats stats;
        memset(&stats, 0, sizeof stats);
        for (int k = 0; k < reps; k++) {
            subject_open(s, (size_t)1 << 30);
            /* a level loads: level blocks interleaved with static ones */
            for (int i = 0; i < n; i++) {
                if (s->kind == SUBJ_ZONE)
                    lv[i] = hk_zone_alloc_tagged(g_bz, sizes[i], HK_TAG_LEVEL, NULL, NULL);
                else if (s->kind == SUBJ_ROVER)
                    lv[i] = hkb_rover_alloc(g_br, sizes[i], HK_TAG_LEVEL);
                else
                    lv[i] = s->a.malloc(sizes[i]);
                st[i] = s->a.malloc(sizes[(i * 7) % n] / 4 + 16);
                if (!lv[i] || !st[i]) exit(1);
                ((char *)lv[i])[0] = 1;
            }
            if (s->kind == SUBJ_ZONE && k == 0) hk_zone_stats(g_bz, &stats);
            uint64_t t0 = hkb_now_ns();
            if (use_tags && s->kind == SUBJ_ZONE)
                hk_zone_free_tags(g_bz, HK_TAG_LEVEL, HK_TAG_LEVSPEC);
            else if (use_tags)
                hkb_rover_free_tags(g_br, HK_TAG_LEVEL, HK_TAG_LEVSPEC);
            else
                for (int i = 0; i < n; i++) s->a.free(lv[i]);
            v[k] = (double)(hkb_now_ns() - t0);
            for (int i = 0; i < n; i++) s->a.free(st[i]);
            subject_close(s);
        }
        double med = hkb_median(v, reps);
        char name[64];
        snprintf(name, sizeof name, "%s%s", s->a.name,
                 use_tags ? (s->kind == SUBJ_ZONE ? " free_tags" : " Z_FreeTags walk") : " free each");
        hkb_record(SUITE, "level", name, "us_per_unload", med / 1000.0, "us");
        hkb_record(SUITE, "level", name, "ns_per_block", med / n, "ns");
        if (mode == 0) {
            tags_ns = med;
            hkb_record(SUITE, "level", "zone", "tracked_overhead_per_block",
                       (double)(stats.used_blocks_bytes - stats.used) / (double)stats.live_blocks,
                       "bytes (half tagged, half untracked blocks)");
        } else {
            char m[80];
            snprintf(m, sizeof m, "ratio_vs_%s", name);
            hkb_record(SUITE, "level", "zone free_tags", m, med / tags_ns,
                       "x (X time / zone free_tags time)");
        }
    }
    hkb_skip_missing(SUITE, "level");
    free(lv);
    free(st);
    free(sizes);
}

/* ---- fragmentation ----------------------------------------------------------------- */

static int first_block(const hk_block_info *i, void *user) {
    *(uintptr_t *)user = (uintptr_t)i->address - 16;
    return 1;
}

static size_t rss_bytes(void) {
    long v = hkb_proc_kib("VmRSS:");
    return v > 0 ? (size_t)v * 1024u : 0;
}

static void workload_fragment(hkb_ctx *ctx, const trace *t) {
    hkb_section(SUITE, "fragment", "frame trace: peak footprint / peak live bytes");
    void **slots = calloc(t->nslots, sizeof(void *));
    /* The zone and the rover in one fixed region: footprint = high water of
     * the address space used, exact. */
    {
        void *mem = mmap(NULL, (size_t)1 << 30, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (mem == MAP_FAILED) exit(1);
        /* the zone, then the zone without runs (its TLSF core alone) */
        double zr = 0;
        for (int nr = 0; nr < 2; nr++) {
            g_bz = hk_zone_create(
                &(hk_zone_desc){.memory = mem, .size = (size_t)1 << 30, .flags = nr ? HK_ZONE_NO_RUNS : 0u});
            hkb_allocator za = {"zone", bz_malloc, bz_free, bz_realloc, bz_memalign, bz_usable};
            uintptr_t base = 0;
            hk_zone_walk(g_bz, first_block, &base); /* the region starts at the first block's header */
            uintptr_t top = 0;
            trace_replay(&za, t, slots, &top);
            double ratio = (double)(top - base) / (double)t->peak_live;
            if (!nr) zr = ratio;
            hkb_record(SUITE, "fragment", nr ? "zone-noruns" : "zone", "footprint_ratio", ratio,
                       "peak high water / peak live");
            hk_zone_destroy(g_bz);
            g_bz = NULL;
        }
        munmap(mem, (size_t)1 << 30);

        subject rov = {{"quake-rover", br_malloc, br_free, br_realloc, NULL, br_usable}, SUBJ_ROVER};
        subject_open(&rov, (size_t)1 << 30);
        uintptr_t rtop = 0;
        trace_replay(&rov.a, t, slots, &rtop);
        double rr = (double)(rtop - (uintptr_t)hkb_rover_base(g_br)) / (double)t->peak_live;
        subject_close(&rov);
        hkb_record(SUITE, "fragment", "quake-rover", "footprint_ratio", rr, "peak high water / peak live");
        hkb_record(SUITE, "fragment", "zone", "ratio_vs_quake-rover", rr / zr,
                   "x (rover ratio / zone ratio)");
    }
    /* Peers (and the growing zone, for comparison): peak RSS growth in a
     * child process, every block fully written, RSS sampled every 256
     * operations. Approximate: page granularity, and memory the allocator
     * kept from earlier work is not counted. */
    subject subj[10];
    int nsub = subjects(subj, SUBJ_SET_PLAIN);
    for (int s = 0; s < nsub - 1; s++) {
        int pfd[2];
        if (pipe(pfd) != 0) exit(1);
        pid_t pid = fork();
        if (pid == 0) {
            close(pfd[0]);
            subject_open(&subj[s], 0);
            const hkb_allocator *a = &subj[s].a;
            size_t base = rss_bytes(), peak = base;
            for (size_t i = 0; i < t->n; i++) {
                const ev *e = &t->ev[i];
                if (e->op == EV_ALLOC) {
                    slots[e->slot] = a->malloc(e->size);
                    memset(slots[e->slot], 1, e->size);
                } else if (e->op == EV_FREE) {
                    a->free(slots[e->slot]);
                } else {
                    slots[e->slot] = a->realloc(slots[e->slot], e->size);
                    memset(slots[e->slot], 1, e->size);
                }
                if ((i & 255) == 0) {
                    size_t r = rss_bytes();
                    if (r > peak) peak = r;
                }
            }
            double ratio = (double)(peak - base) / (double)t->peak_live;
            if (write(pfd[1], &ratio, sizeof ratio) != sizeof ratio) _exit(1);
            _exit(0);
        }
        close(pfd[1]);
        double ratio = 0;
        ssize_t got = read(pfd[0], &ratio, sizeof ratio);
        close(pfd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        char name[64];
        snprintf(name, sizeof name, "%s%s", subj[s].a.name, subj[s].kind == SUBJ_ZONE ? " (growing)" : "");
        if (got == (ssize_t)sizeof ratio)
            hkb_record(SUITE, "fragment", name, "rss_ratio", ratio, "peak RSS growth / peak live (approx.)");
        else
            hkb_skip(SUITE, "fragment", name, "child process failed");
    }
    hkb_skip_missing(SUITE, "fragment");
    (void)ctx;
    free(slots);
}

void hkb_suite_zone(hkb_ctx *ctx);
void hkb_suite_zone(hkb_ctx *ctx) {
    trace t;
    trace_make(&t, ctx->quick, ctx->seed);
    printf("zone: frame trace of %zu operations (%zu allocations), peak live %zu bytes\n", t.n, t.allocs,
           t.peak_live);
    /* HKB_ZONE_WORKLOADS=frame,level (say) runs only those: for profiling */
    const char *only = getenv("HKB_ZONE_WORKLOADS");
    if (!only || strstr(only, "fragment")) workload_fragment(ctx, &t);
    if (!only || strstr(only, "frame")) workload_frame(ctx, &t);
    if (!only || strstr(only, "level")) workload_level(ctx);
    if (!only || strstr(only, "latency")) workload_latency(ctx);
    free(t.ev);
}
