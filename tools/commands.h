/*
 * tools/commands.h - the `heapkit` commands that live in their own files
 * (tools/cmd_*.c), named by the command table in tools/heapkit.c, and the
 * helpers they share (tools/tool_util.c).
 */
#ifndef HEAPKIT_TOOLS_COMMANDS_H
#define HEAPKIT_TOOLS_COMMANDS_H

#include <stddef.h>
#include <stdio.h>

/* Each main gets argv[0] == the command's name; returns the exit status. */
int hk_cmd_record(int argc, char **argv);
void hk_cmd_record_help(FILE *out);
int hk_cmd_replay(int argc, char **argv);
void hk_cmd_replay_help(FILE *out);
int hk_cmd_report(int argc, char **argv);
void hk_cmd_report_help(FILE *out);
int hk_cmd_map(int argc, char **argv);
void hk_cmd_map_help(FILE *out);
int hk_cmd_stats(int argc, char **argv);
void hk_cmd_stats_help(FILE *out);

/* Finds a library heapkit installs (e.g. "libheapkit-record.so"): $env if
 * set, next to this program, in ../lib or ../lib64, in the install libdir.
 * Returns 1 with the path in out. */
int hk_tool_find_lib(const char *name, const char *env, char *out, size_t n);

/* Checks that `prog` (a name searched in PATH, or a path) can be run with a
 * preload library: it exists, is executable and is dynamically linked (a
 * script's interpreter is checked instead). On success returns 1 and the
 * resolved path in out; otherwise prints "heapkit <cmd>: ..." and returns 0. */
int hk_tool_check_program(const char *cmd, const char *prog, char *out, size_t n);

/* Runs argv[0] (resolved path `path`) with LD_PRELOAD=libs (prepended to
 * any LD_PRELOAD already set) and the variables in env ("NAME=value",
 * NULL-terminated; the value "@pid" stands for the child's process id),
 * waits for it; returns its exit status, 128+signal when
 * a signal ended it, or 127 when it could not be started. */
int hk_tool_run(const char *cmd, const char *path, char **argv, const char *libs, const char *const *env);

#endif /* HEAPKIT_TOOLS_COMMANDS_H */
