#include "commands.h"
void hk_cmd_report_help(FILE *out) { fprintf(out, "todo\n"); }
int hk_cmd_report(int argc, char **argv) { (void)argc; (void)argv; return 2; }
