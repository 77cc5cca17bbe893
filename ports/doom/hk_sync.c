/*
 * ports/doom/hk_sync.c - the game-state checksum and zone figures that
 * check-doom compares between the stock engine and the heapkit engine.
 * Compiled into both (build.sh adds it to Chocolate Doom's chocolate-doom
 * target; the engine's own sources are fetched at build time and never
 * kept in this repository).
 *
 * Invariants:
 * - The checksum reads only game state that does not depend on where the
 *   allocator put things: values of map objects (in thinker order), of the
 *   players, of the sectors, the play random index and the level clock;
 *   never a pointer value, and nothing reached through a pointer the
 *   engine may leave dangling (a map object's target). Two engines that play a demo identically print
 *   the same checksum; a desync, or a read of memory the zone left
 *   uninitialised that changes play, changes it.
 * - HK_SyncTic runs at the start of every G_Ticker (each game tic) and
 *   folds the state left by the previous tic into a running hash; the
 *   report folds the final state once more.
 * - With -synctrace every tic prints its running checksum (to find the
 *   first tic where two engines part). With -zonecheck the zone is checked (Z_CheckHeap) at every tic; with
 *   -hkstats the zone's use is sampled at every tic (peak of used block
 *   bytes and the figures at the end) through HK_ZoneSample, which each
 *   engine's zone provides (ports/doom/z_zone.c, stock-zone-stats.c).
 * - Z_FreeTags is reached from p_setup.c through the linker's --wrap, so
 *   its time at each level change is measured without touching either zone.
 */
#include <stdio.h>
#include <stdint.h>
#include <time.h>

#include "doomstat.h"
#include "d_player.h"
#include "m_argv.h"
#include "p_local.h"
#include "r_state.h"
#include "z_zone.h"

extern int prndindex;

/* Each zone fills these (used and free bytes count block headers as used). */
void HK_ZoneSample(unsigned long *used, unsigned long *free_bytes, unsigned long *largest,
                   unsigned long *blocks, unsigned long *purges);

void HK_ZoneMap(const char *path, const char *title);

void HK_SyncTic(void);
void HK_SyncReport(void);
void __real_Z_FreeTags(int lowtag, int hightag);
void __wrap_Z_FreeTags(int lowtag, int hightag);

static uint64_t hash = 1469598103934665603ull;
static unsigned long tics;
static int check_every_tic = -1;
static int sample_every_tic = -1;
static int trace_every_tic;
static unsigned long peak_used;
static double freetags_ms, freetags_max_ms;
static unsigned long freetags_calls;
static const char *map_dir;
static int maps_written, map_level = -1;

static void mix(int64_t v) {
    int i;
    for (i = 0; i < 8; i++) {
        hash ^= (uint64_t)((v >> (8 * i)) & 0xff);
        hash *= 1099511628211ull;
    }
}

static void fold_state(void) {
    thinker_t *th;
    int i, j;

    mix(gametic);
    mix(leveltime);
    mix(gameepisode);
    mix(gamemap);
    mix(gamestate);
    mix(prndindex);
    for (th = thinkercap.next; th != NULL && th != &thinkercap; th = th->next) {
        const mobj_t *mo;
        if (th->function.acp1 != (actionf_p1)P_MobjThinker) continue;
        mo = (const mobj_t *)th;
        mix(mo->x);
        mix(mo->y);
        mix(mo->z);
        mix((int64_t)mo->angle);
        mix(mo->momx);
        mix(mo->momy);
        mix(mo->momz);
        mix(mo->type);
        mix(mo->tics);
        mix(mo->health);
        mix(mo->flags);
        mix(mo->movedir);
        mix(mo->movecount);
        mix(mo->reactiontime);
        mix(mo->threshold);
        mix(mo->state != NULL ? (int64_t)(mo->state - states) : -1);
        /* not what the target is: a corpse's target may point to a map
         * object freed since (vanilla DOOM keeps no count of references),
         * whose memory each zone reuses differently (docs/doom.md) */
        mix(mo->target != NULL);
    }
    for (i = 0; i < MAXPLAYERS; i++) {
        const player_t *p = &players[i];
        if (!playeringame[i]) continue;
        mix(p->playerstate);
        mix(p->health);
        mix(p->armorpoints);
        mix(p->readyweapon);
        mix(p->viewz);
        mix(p->killcount);
        mix(p->itemcount);
        mix(p->secretcount);
        for (j = 0; j < NUMAMMO; j++) mix(p->ammo[j]);
    }
    if (gamestate == GS_LEVEL && sectors != NULL) {
        for (i = 0; i < numsectors; i++) {
            mix(sectors[i].floorheight);
            mix(sectors[i].ceilingheight);
            mix(sectors[i].lightlevel);
            mix(sectors[i].specialdata != NULL);
        }
    }
}

static void sample(void) {
    unsigned long used, fr, largest, blocks, purges;
    HK_ZoneSample(&used, &fr, &largest, &blocks, &purges);
    if (used > peak_used) peak_used = used;
}

void HK_SyncTic(void) {
    int i;
    if (check_every_tic < 0) {
        check_every_tic = M_ParmExists("-zonecheck");
        sample_every_tic = M_ParmExists("-hkstats");
        trace_every_tic = M_ParmExists("-synctrace");
        i = M_CheckParmWithArgs("-hkmap", 1);
        map_dir = i > 0 ? myargv[i + 1] : NULL;
    }
    /* -hkmap DIR: the zone's map at the first tic of each level */
    if (map_dir != NULL && gamestate == GS_LEVEL && gamemap > 0 && gameepisode * 100 + gamemap != map_level) {
        char path[512], title[160], level[16];
        map_level = gameepisode * 100 + gamemap;
        if (gamemode == commercial)
            snprintf(level, sizeof level, "MAP%02d", gamemap);
        else
            snprintf(level, sizeof level, "E%dM%d", gameepisode, gamemap);
        snprintf(path, sizeof path, "%s/%d-%s.svg", map_dir, ++maps_written, level);
        snprintf(title, sizeof title, "Doom's zone (heapkit) at the first tic of %s, level %d of the demo",
                 level, maps_written);
        HK_ZoneMap(path, title);
    }
    fold_state();
    tics++;
    if (trace_every_tic)
        fprintf(stderr, "hk-tic %lu map %d leveltime %d prnd %d checksum %016llx\n", tics, gamemap, leveltime,
                prndindex, (unsigned long long)hash);
    if (check_every_tic) Z_CheckHeap();
    if (sample_every_tic) sample();
}

void HK_SyncReport(void) {
    unsigned long used, fr, largest, blocks, purges;
    fold_state();
    fprintf(stderr, "hk-sync: tics %lu gametic %d checksum %016llx\n", tics, gametic,
            (unsigned long long)hash);
    if (sample_every_tic == 1) {
        sample();
        HK_ZoneSample(&used, &fr, &largest, &blocks, &purges);
        fprintf(stderr,
                "hk-stats: zone %u peak_used %lu used %lu free %lu largest_free %lu blocks %lu "
                "purges %lu freetags_calls %lu freetags_ms %.3f freetags_max_ms %.3f\n",
                Z_ZoneSize(), peak_used, used, fr, largest, blocks, purges, freetags_calls, freetags_ms,
                freetags_max_ms);
    }
    fflush(stderr);
}

void __wrap_Z_FreeTags(int lowtag, int hightag) {
    struct timespec a, b;
    double ms;
    clock_gettime(CLOCK_MONOTONIC, &a);
    __real_Z_FreeTags(lowtag, hightag);
    clock_gettime(CLOCK_MONOTONIC, &b);
    ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    freetags_ms += ms;
    if (ms > freetags_max_ms) freetags_max_ms = ms;
    freetags_calls++;
}
