/* The option table (shim/options.h): every option and flag declared once
 * and consistent — defaults and fixed flag values valid for their option,
 * no variable or flag declared twice — and the helpers the preload
 * libraries read it with. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* setenv */
#endif
#include "hk_test.h"

#include "../shim/options.h"

HKT_TEST(guard_options_table_consistent) {
    (void)hkt_on_error;
    for (size_t i = 0; i < HK_NOPTIONS; i++) {
        const hk_option *o = &hk_options[i];
        CHECK(o->var && strncmp(o->var, "HEAPKIT_", 8) == 0);
        CHECK(o->help && o->help[0]);
        CHECK(strcmp(o->library, "guard") == 0 || strcmp(o->library, "malloc") == 0 ||
              strcmp(o->library, "record") == 0 || strcmp(o->library, "tool") == 0);
        if (o->dflt) CHECK(hk_opt_valid((hk_opt_id)i, o->dflt));
        if (!o->dflt) CHECK(o->shown != NULL); /* help must say what unset means */
        CHECK((o->type == HK_OPT_CHOICE) == (o->choices != NULL));
        for (size_t j = 0; j < i; j++) CHECK(strcmp(hk_options[j].var, o->var) != 0);
    }
    for (size_t i = 0; i < HK_NFLAGS; i++) {
        const hk_flag *f = &hk_flags[i];
        CHECK(f->flag[0] == '-' && f->flag[1] == '-');
        CHECK((size_t)f->option < HK_NOPTIONS);
        if (f->value) CHECK(hk_opt_valid(f->option, f->value));
        for (size_t j = 0; j < i; j++) CHECK(strcmp(hk_flags[j].flag, f->flag) != 0);
    }
}

HKT_TEST(guard_options_values_and_defaults) {
    size_t n = 0;
    CHECK(hk_opt_parse_number("8m", &n) && n == (size_t)8 << 20);
    CHECK(hk_opt_parse_number("64g", &n) && n == (size_t)64 << 30);
    CHECK(hk_opt_parse_number("123", &n) && n == 123);
    CHECK(!hk_opt_parse_number("", &n) && !hk_opt_parse_number("m", &n) && !hk_opt_parse_number("12x", &n));
    CHECK(hk_opt_valid(HK_OPT_GUARD_SIDE, "random") && !hk_opt_valid(HK_OPT_GUARD_SIDE, "middle"));
    CHECK(!hk_opt_valid(HK_OPT_GUARD_SIDE, "star")); /* a prefix of a choice is not one */
    CHECK(hk_opt_valid(HK_OPT_GUARD_LEAKS, "all"));

    unsetenv("HEAPKIT_GUARD_QUARANTINE");
    CHECK_EQ(hk_opt_number(HK_OPT_GUARD_QUARANTINE), (size_t)8 << 20); /* the declared default */
    setenv("HEAPKIT_GUARD_QUARANTINE", "32m", 1);
    CHECK_EQ(hk_opt_number(HK_OPT_GUARD_QUARANTINE), (size_t)32 << 20);
    setenv("HEAPKIT_GUARD_QUARANTINE", "lots", 1); /* not valid: the default */
    CHECK_EQ(hk_opt_number(HK_OPT_GUARD_QUARANTINE), (size_t)8 << 20);
    unsetenv("HEAPKIT_GUARD_QUARANTINE");

    setenv("HEAPKIT_GUARD_SIDE", "middle", 1);
    CHECK(strcmp(hk_opt_get(HK_OPT_GUARD_SIDE), "end") == 0);
    unsetenv("HEAPKIT_GUARD_SIDE");

    unsetenv("HEAPKIT_STATS");
    CHECK(!hk_opt_bool(HK_OPT_MALLOC_STATS));
    setenv("HEAPKIT_STATS", "yes", 1); /* anything but 0 */
    CHECK(hk_opt_bool(HK_OPT_MALLOC_STATS));
    setenv("HEAPKIT_STATS", "0", 1);
    CHECK(!hk_opt_bool(HK_OPT_MALLOC_STATS));
    unsetenv("HEAPKIT_STATS");
    CHECK(hk_opt_bool(HK_OPT_GUARD_ABORT)); /* default 1 */
    CHECK(hk_opt_get(HK_OPT_GUARD_LOG) == NULL);
}
