#include "commands.h"
void hk_cmd_map_help(FILE *out) { fprintf(out, "todo\n"); }
int hk_cmd_map(int argc, char **argv) { (void)argc; (void)argv; return 2; }
