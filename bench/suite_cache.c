#include "harness.h"
void hkb_suite_cache(hkb_ctx *ctx);
void hkb_suite_cache(hkb_ctx *ctx) { (void)ctx; }
