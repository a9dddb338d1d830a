/* cmd_tune.c — `attntune tune CONFIG` and the hidden `attntune __worker DEVICE`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "generator/generator.h"
#include "runtime/rt.h"
#include "tuner/cli.h"
#include "tuner/commands.h"
#include "tuner/tune.h"
#include "tuner/worker.h"

static const char USAGE[] =
    "usage: attntune tune CONFIG.yaml [--db FILE] [--devices all|0,1,...] [--shard I/N]\n"
    "                     [--force] [--jobs N] [--watchdog SECONDS]\n"
    "       attntune tune CONFIG.yaml --dry-run [--arch ARCH] [--shard I/N]\n"
    "\n"
    "Tunes every shape of the config: compiles the variants of the fa2, fa3 and decode families\n"
    "(for a ragged or paged shape, the serving variants of its layout and page size, verified\n"
    "against the naive kernels on the same packed or paged batch, cuDNN's ragged graph as the\n"
    "baseline where it runs the layout, stored under the shape's serving key)\n"
    "that the generator lists for it (fa3 on sm_90a, decode for queries of 1 to 16 tokens; narrowed\n"
    "by the config's search section) with NVRTC in a thread pool while the GPU verifies each against\n"
    "the naive reference and cuDNN (on the GPU) and times it; a variant key listed for several\n"
    "shapes, or asked for by several GPUs, compiles once per run; times cuDNN as the baseline;\n"
    "stores every trial and the fastest verified implementation per shape, with its cubin, in\n"
    "the SQLite cache.\n"
    "Each GPU's work runs in a worker process: a kernel that faults or hangs is recorded as\n"
    "crashed or timeout and the run goes on. Results are committed as they finish: a rerun skips\n"
    "finished shapes and trials, and Ctrl-C finishes the trial in flight and exits.\n"
    "\n"
    "  --db FILE          the cache (default attntune.db; created if missing)\n"
    "  --devices LIST     'all' or distinct GPU ordinals, one worker each (default: the config's);\n"
    "                     each GPU takes the next untuned shape, largest (FLOPs) first\n"
    "  --shard I/N        tune only shard I of N (0-based): a deterministic slice for fleet runs;\n"
    "                     merge the shards' files with 'attntune cache merge'\n"
    "  --force            retune shapes already in the cache\n"
    "  --jobs N           NVRTC compile threads, shared by the GPUs (default: the CPUs)\n"
    "  --watchdog S       seconds a worker may stay silent beyond its expected time (default 60)\n"
    "  --dry-run          check the config and the arguments without a GPU (the driver is not\n"
    "                     loaded) and print what a run would do: each shape with its group, its\n"
    "                     candidates per family (the generator's list for --arch, narrowed by the\n"
    "                     search section and the budget) and the bytes of its Q, K and V; then the\n"
    "                     totals\n"
    "  --arch ARCH        the NVRTC target --dry-run enumerates for (default sm_90a)\n"
    "  --help, -h         this text\n"
    "\n"
    "Arguments (--db, --devices, --shard, ...) and the config are checked before the driver is\n"
    "loaded: errors there exit 2 on any machine. The config format is described in\n"
    "docs/config.md; configs/ has examples.\n";

/* Q, K and V of one shape in bytes (as double: a shape may hold up to 3 x 2^61 elements); K and V
 * in their own dtype (1 byte per element for an FP8 KV cache). */
static double qkv_bytes(const at_shape *s)
{
  double q = (double)s->batch * s->q_len * s->q_heads * s->head_dim;
  double kv = (double)s->batch * s->kv_len * s->kv_heads * s->head_dim;
  return q * (double)at_dtype_size(s->dtype) + 2 * kv * (double)at_dtype_size(at_shape_kv_dtype(s));
}

static void format_bytes(double bytes, char *buf, size_t size)
{
  static const char *const UNITS[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  double v = bytes;
  while (v >= 1024 && u < 6) v /= 1024, u++;
  if (u == 0) snprintf(buf, size, "%.0f B", bytes);
  else snprintf(buf, size, "%.1f %s", v, UNITS[u]);
}

/* Keys seen so far, to count the NVRTC runs a tuning run makes (its compile memo compiles each
 * key once). A linear search: a config lists at most a few thousand candidates. */
typedef struct key_set {
  char (*keys)[GEN_KEY_MAX];
  int n, cap;
} key_set;

static at_status key_set_add(key_set *ks, const gen_variant *v)
{
  char key[GEN_KEY_MAX];
  at_status rc = gen_variant_key(v, key, sizeof key);
  if (rc != AT_OK) return rc;
  for (int i = 0; i < ks->n; i++)
    if (strcmp(ks->keys[i], key) == 0) return AT_OK;
  if (ks->n == ks->cap) {
    int cap = ks->cap ? 2 * ks->cap : 256;
    void *grown = realloc(ks->keys, (size_t)cap * sizeof *ks->keys);
    if (!grown) return at_fail(AT_ERR_NOMEM, "no memory for %d variant keys", cap);
    ks->keys = grown, ks->cap = cap;
  }
  snprintf(ks->keys[ks->n++], GEN_KEY_MAX, "%s", key);
  return AT_OK;
}

/* --dry-run: the expanded config and the work a run would do, without the driver. */
static int dry_run(const tn_config *cfg, const char *arch, int shard_count, int all, const int *devices,
                   int n_devices)
{
  gen_target target;
  at_status rc = gen_target_for_arch(arch, &target);
  if (rc != AT_OK) return tn_usage_error("tune", "--arch: %s", at_last_error());
  printf("config %s: %d shape%s%s, candidates for %s", cfg->path, cfg->n_shapes, cfg->n_shapes == 1 ? "" : "s",
         shard_count > 1 ? " (this shard)" : "", target.arch);
  if (all) printf(", devices all");
  else
    for (int i = 0; i < n_devices; i++) printf("%s%d", i ? "," : ", devices ", devices[i]);
  if (cfg->budget_candidates > 0) printf(", budget %d candidates", cfg->budget_candidates);
  if (cfg->budget_seconds > 0) printf(", %g s per shape", cfg->budget_seconds);
  printf("\n%-48s %-16s %-36s %s\n", "shape", "group", "candidates", "Q+K+V");
  long long total_candidates = 0;
  double total_bytes = 0;
  int without = 0;
  key_set distinct = {0};
  for (int i = 0; i < cfg->n_shapes; i++) {
    const at_shape *s = &cfg->shapes[i];
    char key[256], what[512], size[32];
    gen_variant vs[GEN_MAX_VARIANTS];
    int n = 0;
    const tn_serving_shape *v = cfg->serving ? &cfg->serving[i] : NULL;
    tn_shape_key(s, key, sizeof key);
    if (v && !at_serving_is_padded(&v->layout)) /* the key its rows get (at_serving_key) */
      at_serving_key(s, &v->layout, v->layout.q_layout == AT_SEQ_RAGGED ? v->q_lens : NULL, v->kv_lens, key,
                     sizeof key);
    if (s->dtype == AT_DTYPE_F32) {
      snprintf(what, sizeof what, "0 (f32: naive kernels only)");
    } else if (tn_tune_candidates(cfg, s, v, &target, vs, &n) != AT_OK) {
      snprintf(what, sizeof what, "0 (%s)", at_last_error());
      n = 0;
    } else {
      int per[GEN_FAMILY_COUNT] = {0}, used = 0;
      for (int k = 0; k < n; k++) per[vs[k].family]++;
      for (int k = 0; k < n; k++)
        if ((rc = key_set_add(&distinct, &vs[k])) != AT_OK) {
          free(distinct.keys);
          fprintf(stderr, "attntune tune: %s\n", at_last_error());
          return TN_EXIT_RUNTIME;
        }
      used = snprintf(what, sizeof what, "%d", n);
      /* In the generator's order: the family of the first candidate first. */
      int first = 1;
      for (int k = 0; k < n; k++) {
        gen_family f = vs[k].family;
        if (per[f] == 0) continue;
        used += snprintf(what + used, sizeof what - (size_t)used, "%s%s %d", first ? " (" : ", ", gen_family_name(f),
                         per[f]);
        per[f] = 0, first = 0;
      }
      if (!first) snprintf(what + used, sizeof what - (size_t)used, ")");
    }
    if (n == 0) without++;
    total_candidates += n;
    total_bytes += qkv_bytes(s);
    format_bytes(qkv_bytes(s), size, sizeof size);
    printf("%-48s %-16s %-36s %s\n", key, cfg->groups[i][0] ? cfg->groups[i] : "-", what, size);
  }
  char size[32];
  format_bytes(total_bytes, size, sizeof size);
  printf("total: %d shape%s, %lld candidate%s, %.0f bytes of Q, K and V (%s)", cfg->n_shapes,
         cfg->n_shapes == 1 ? "" : "s", total_candidates, total_candidates == 1 ? "" : "s", total_bytes, size);
  if (without) printf("; %d shape%s without fused candidates", without, without == 1 ? "" : "s");
  printf("\n%d distinct variant key%s: at most this many NVRTC runs (a run compiles each key once)\n",
         distinct.n, distinct.n == 1 ? "" : "s");
  free(distinct.keys);
  return TN_EXIT_OK;
}

int tn_cmd_tune(int argc, char **argv)
{
  enum { O_DB = 256, O_DEVICES, O_SHARD, O_FORCE, O_JOBS, O_WATCHDOG, O_DRY_RUN, O_ARCH, O_HELP };
  static const struct option options[] = {
      {"db", required_argument, NULL, O_DB},         {"devices", required_argument, NULL, O_DEVICES},
      {"shard", required_argument, NULL, O_SHARD},   {"force", no_argument, NULL, O_FORCE},
      {"jobs", required_argument, NULL, O_JOBS},     {"watchdog", required_argument, NULL, O_WATCHDOG},
      {"dry-run", no_argument, NULL, O_DRY_RUN},     {"arch", required_argument, NULL, O_ARCH},
      {"help", no_argument, NULL, O_HELP},           {NULL, 0, NULL, 0}};
  tn_tune_opts opts = {.db_path = "attntune.db", .exe = "/proc/self/exe", .watchdog_s = 60};
  const char *devices_text = NULL, *arch = NULL;
  int shard_index = 0, shard_count = 1, watchdog = 60, dry = 0, c;
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
    case O_DRY_RUN: dry = 1; break;
    case O_ARCH: arch = optarg; break;
    case 'h':
    case O_HELP: fputs(USAGE, stdout); return TN_EXIT_OK;
    default:
      if (optopt) return tn_usage_error("tune", "option '%s' needs a value", argv[optind - 1]);
      return tn_usage_error("tune", "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind >= argc) return tn_usage_error("tune", "which config? (attntune tune CONFIG.yaml)");
  if (optind + 1 < argc) return tn_usage_error("tune", "unexpected argument '%s'", argv[optind + 1]);
  if (arch && !dry)
    return tn_usage_error("tune", "--arch applies to --dry-run only (a run compiles for each GPU's own arch)");
  /* Every argument is checked before the driver is loaded. */
  if (!tn_check_db_path("tune", opts.db_path)) return TN_EXIT_USAGE;
  int all = 0, devices[TN_CONFIG_MAX_DEVICES], n_devices = 0;
  if (devices_text && !tn_parse_devices("tune", devices_text, TN_CONFIG_MAX_DEVICES, &all, devices, &n_devices))
    return TN_EXIT_USAGE;

  tn_config cfg;
  at_status rc = tn_config_load(argv[optind], &cfg);
  if (rc != AT_OK) {
    fprintf(stderr, "attntune tune: %s\n", at_last_error());
    return rc == AT_ERR_IO || rc == AT_ERR_CONFIG ? TN_EXIT_USAGE : TN_EXIT_RUNTIME;
  }
  if (!devices_text) {
    all = cfg.all_devices, n_devices = cfg.n_devices;
    memcpy(devices, cfg.devices, sizeof devices);
  }
  if (shard_count > 1 && (rc = tn_config_keep_shard(&cfg, shard_index, shard_count)) != AT_OK) {
    tn_config_free(&cfg);
    return tn_fail_exit("tune", rc);
  }
  if (dry) {
    int code = dry_run(&cfg, arch ? arch : "sm_90a", shard_count, all, devices, n_devices);
    tn_config_free(&cfg);
    return code;
  }
  if ((rc = tn_resolve_devices(all, TN_CONFIG_MAX_DEVICES, devices, &n_devices)) != AT_OK) {
    tn_config_free(&cfg);
    return tn_fail_exit("tune", rc);
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
