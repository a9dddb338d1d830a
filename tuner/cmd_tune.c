/* cmd_tune.c — `attntune tune CONFIG` and the hidden `attntune __worker DEVICE`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/rt.h"
#include "tuner/cli.h"
#include "tuner/commands.h"
#include "tuner/tune.h"
#include "tuner/worker.h"

static const char USAGE[] =
    "usage: attntune tune CONFIG.yaml [--db FILE] [--devices all|0,1,...] [--shard I/N]\n"
    "                     [--force] [--jobs N] [--watchdog SECONDS]\n"
    "\n"
    "Tunes every shape of the config: compiles the fa2 variants the generator lists (narrowed by\n"
    "the config's search section) with NVRTC in a thread pool while the GPU verifies each against\n"
    "the naive reference and cuDNN and times it; times cuDNN as the baseline; stores every trial\n"
    "and the fastest verified implementation per shape, with its cubin, in the SQLite cache.\n"
    "Each GPU's work runs in a worker process: a kernel that faults or hangs is recorded as\n"
    "crashed or timeout and the run goes on. Results are committed as they finish: a rerun skips\n"
    "finished shapes and trials, and Ctrl-C finishes the trial in flight and exits.\n"
    "\n"
    "  --db FILE          the cache (default attntune.db; created if missing)\n"
    "  --devices LIST     'all' or GPU ordinals, one worker each (default: the config's devices)\n"
    "  --shard I/N        tune only shard I of N (0-based): a deterministic slice for fleet runs;\n"
    "                     merge the shards' files with 'attntune cache merge'\n"
    "  --force            retune shapes already in the cache\n"
    "  --jobs N           NVRTC compile threads per GPU (default: CPUs / GPUs)\n"
    "  --watchdog S       seconds a worker may stay silent beyond its expected time (default 60)\n"
    "\n"
    "The config format is described in docs/config.md; configs/ has examples.\n";

static int parse_devices(const char *text, int *all, int *devices, int *n)
{
  *n = 0;
  *all = strcmp(text, "all") == 0;
  if (*all) return 1;
  char *copy = strdup(text), *save = NULL;
  int ok = copy != NULL;
  for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && ok; tok = strtok_r(NULL, ",", &save)) {
    ok = *n < TN_CONFIG_MAX_DEVICES && tn_parse_int("tune", "--devices", tok, 0, 1023, &devices[*n]);
    if (ok) ++*n;
  }
  free(copy);
  if (ok && *n == 0) ok = 0, tn_usage_error("tune", "--devices needs 'all' or ordinals like 0,1");
  return ok;
}

/* The ordinals to use: explicit ones are checked against the GPUs present. */
static at_status resolve_devices(int all, int *devices, int *n)
{
  int count = 0;
  at_status rc = rt_device_count(&count);
  if (rc != AT_OK) return rc;
  if (count == 0) return at_fail(AT_ERR_NO_DEVICE, "no CUDA GPU found");
  if (all) {
    *n = count < TN_CONFIG_MAX_DEVICES ? count : TN_CONFIG_MAX_DEVICES;
    for (int i = 0; i < *n; i++) devices[i] = i;
    return AT_OK;
  }
  for (int i = 0; i < *n; i++)
    if (devices[i] >= count)
      return at_fail(AT_ERR_NO_DEVICE, "GPU %d does not exist (%d GPU%s present)", devices[i], count,
                     count == 1 ? "" : "s");
  return AT_OK;
}

int tn_cmd_tune(int argc, char **argv)
{
  enum { O_DB = 256, O_DEVICES, O_SHARD, O_FORCE, O_JOBS, O_WATCHDOG, O_HELP };
  static const struct option options[] = {
      {"db", required_argument, NULL, O_DB},         {"devices", required_argument, NULL, O_DEVICES},
      {"shard", required_argument, NULL, O_SHARD},   {"force", no_argument, NULL, O_FORCE},
      {"jobs", required_argument, NULL, O_JOBS},     {"watchdog", required_argument, NULL, O_WATCHDOG},
      {"help", no_argument, NULL, O_HELP},           {NULL, 0, NULL, 0}};
  tn_tune_opts opts = {.db_path = "attntune.db", .exe = "/proc/self/exe", .watchdog_s = 60};
  const char *devices_text = NULL;
  int shard_index = 0, shard_count = 1, watchdog = 60, c;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
    case O_DB: opts.db_path = optarg; break;
    case O_DEVICES: devices_text = optarg; break;
    case O_SHARD:
      if (tn_shard_parse(optarg, &shard_index, &shard_count) != AT_OK)
        return tn_usage_error("tune", "%s", at_last_error());
      break;
    case O_FORCE: opts.force = 1; break;
    case O_JOBS: if (!tn_parse_int("tune", "--jobs", optarg, 1, 256, &opts.jobs)) return TN_EXIT_USAGE; break;
    case O_WATCHDOG:
      if (!tn_parse_int("tune", "--watchdog", optarg, 1, 86400, &watchdog)) return TN_EXIT_USAGE;
      opts.watchdog_s = watchdog;
      break;
    case O_HELP: fputs(USAGE, stdout); return TN_EXIT_OK;
    default:
      if (optopt) return tn_usage_error("tune", "option '%s' needs a value", argv[optind - 1]);
      return tn_usage_error("tune", "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind >= argc) return tn_usage_error("tune", "which config? (attntune tune CONFIG.yaml)");
  if (optind + 1 < argc) return tn_usage_error("tune", "unexpected argument '%s'", argv[optind + 1]);

  tn_config cfg;
  at_status rc = tn_config_load(argv[optind], &cfg);
  if (rc != AT_OK) {
    fprintf(stderr, "attntune tune: %s\n", at_last_error());
    return rc == AT_ERR_IO || rc == AT_ERR_CONFIG ? TN_EXIT_USAGE : TN_EXIT_RUNTIME;
  }
  int all = cfg.all_devices, devices[TN_CONFIG_MAX_DEVICES], n_devices = cfg.n_devices;
  memcpy(devices, cfg.devices, sizeof devices);
  if (devices_text && !parse_devices(devices_text, &all, devices, &n_devices)) {
    tn_config_free(&cfg);
    return TN_EXIT_USAGE;
  }
  if (shard_count > 1 && (rc = tn_config_keep_shard(&cfg, shard_index, shard_count)) != AT_OK) {
    tn_config_free(&cfg);
    return tn_fail_exit("tune", rc);
  }
  if ((rc = resolve_devices(all, devices, &n_devices)) != AT_OK) {
    tn_config_free(&cfg);
    return tn_fail_exit("tune", rc);
  }
  if (opts.jobs == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    opts.jobs = cpus > n_devices ? (int)(cpus / n_devices) : 1;
  }
  fprintf(stderr, "attntune tune: %s: %d shape%s%s on %d GPU%s, cache %s\n", cfg.path, cfg.n_shapes,
          cfg.n_shapes == 1 ? "" : "s", shard_count > 1 ? " (this shard)" : "", n_devices,
          n_devices == 1 ? "" : "s", opts.db_path);
  int code = tn_tune_run(&cfg, &opts, devices, n_devices);
  tn_config_free(&cfg);
  return code;
}

int tn_cmd_worker(int argc, char **argv)
{
  int device = 0;
  if (argc != 2 || !tn_parse_int("__worker", "DEVICE", argv[1], 0, 1023, &device)) return TN_EXIT_USAGE;
  /* The protocol owns the original stdout; stray prints go to stderr instead. */
  int out = dup(1);
  if (out < 0 || dup2(2, 1) < 0) return TN_EXIT_RUNTIME;
  return tn_worker_serve(device, 0, out);
}
