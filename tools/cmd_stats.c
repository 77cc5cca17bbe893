#include "commands.h"
void hk_cmd_stats_help(FILE *out) { fprintf(out, "todo\n"); }
int hk_cmd_stats(int argc, char **argv) { (void)argc; (void)argv; return 2; }
