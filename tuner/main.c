/*
 * main.c — the attntune command line: a table of subcommands, each with its own option parser.
 * Exit codes: 0 success, 1 runtime failure (no GPU, CUDA error), 2 usage or config error.
 */
#include <stdio.h>
#include <string.h>

#include "attntune.h"
#include "runtime/rt.h"
#include "tuner/cli.h"
#include "tuner/commands.h"

struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary; /* NULL: hidden from --help */
};

static const struct command COMMANDS[] = {
    {"devices", tn_cmd_devices, "list the GPUs with compute capability, memory, driver, NVRTC and cuDNN"},
    {"gen", tn_cmd_gen, "list, emit and compile the kernel variants for a shape (no GPU needed)"},
    {"bench", tn_cmd_bench, "verify and time naive, cuDNN and generated (fa2, fa3, decode) kernels on one shape"},
    {"tune", tn_cmd_tune, "tune a YAML config's shapes (fa2, fa3, decode kernels) into the SQLite cache (the main job)"},
    {"cache", tn_cmd_cache, "list, show, export, merge, prune and migrate tuning caches"},
    {"report", tn_cmd_report, "tuned-vs-cuDNN results of a cache as text, md, csv, json or html with charts"},
    {"__worker", tn_cmd_worker, NULL},
};

static void print_usage(FILE *out)
{
  fprintf(out,
          "usage: attntune [--help] [--version] <command> [<args>]\n"
          "\n"
          "attntune generates fused attention kernels, verifies them against a naive reference\n"
          "and cuDNN, and keeps the fastest per shape and GPU.\n"
          "\n"
          "commands:\n");
  for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
    if (COMMANDS[i].summary) fprintf(out, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
  fprintf(out,
          "\n"
          "'attntune <command> --help' (or -h) describes a command.\n"
          "Environment: ATTNTUNE_CUDNN names the libcudnn.so.9 (file or folder) to load.\n"
          "Exit codes: 0 success, 1 runtime failure (no GPU, CUDA error), 2 usage error.\n");
}

int main(int argc, char **argv)
{
  /* Load NVRTC before anything else can (cuDNN's runtime-compiled engines load it too), so that
   * its compile cache is off in this process and every compile reports its resources. A missing
   * NVRTC is reported by the commands that need it. */
  rt_nvrtc_load();
  if (argc < 2) {
    print_usage(stderr);
    return TN_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
    print_usage(stdout);
    return TN_EXIT_OK;
  }
  if (strcmp(name, "--version") == 0) {
    printf("attntune %s\n", at_version());
    return TN_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
    if (strcmp(name, COMMANDS[i].name) == 0) return COMMANDS[i].run(argc - 1, argv + 1);
  if (name[0] == '-') fprintf(stderr, "attntune: unknown option '%s'\n", name);
  else fprintf(stderr, "attntune: unknown command '%s'\n", name);
  fprintf(stderr, "Try 'attntune --help'.\n");
  return TN_EXIT_USAGE;
}
