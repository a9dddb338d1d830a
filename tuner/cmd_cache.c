/* cmd_cache.c — `attntune cache list|show|export|merge|prune|migrate`. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "tuner/cli.h"
#include "tuner/commands.h"
#include "generator/generator.h"
#include "runtime/lookup.h"
#include "runtime/rt.h"
#include "tuner/tune.h"

static const char USAGE[] =
    "usage: attntune cache list   [--db FILE] [--gpu MODEL]\n"
    "       attntune cache show   SHAPE_KEY [--db FILE] [--gpu MODEL]\n"
    "       attntune cache export --format csv|json [--trials] [--db FILE] [--gpu MODEL] [--out FILE]\n"
    "       attntune cache merge  A.db B.db ... --into C.db\n"
    "       attntune cache prune  [--db FILE]\n"
    "       attntune cache migrate [--db FILE]\n"
    "\n"
    "  list    the best implementation per (GPU model, shape) with cuDNN's time and the speedup;\n"
    "          rows of other kernel templates are marked 'not used', rows measured with another\n"
    "          cuDNN or NVRTC than this machine's 'stale' (tune retimes them), with what changed\n"
    "  show    every trial of one shape (keys as 'list' prints them, e.g.\n"
    "          b2.t1024.s1024.hq16.hkv16.d128.bf16.causal)\n"
    "  export  best rows (or all trials with --trials) as CSV or JSON\n"
    "  merge   copy every trial of the inputs into C and keep the faster best per key (fleet runs:\n"
    "          one file per shard, merged afterwards); of rows measured with different cuDNN or\n"
    "          NVRTC versions, the later. All or nothing: the result is written beside C and renamed\n"
    "          over it. C may be new; it may not be one of the inputs\n"
    "  prune   delete results measured with other kernel templates than this build's\n"
    "  migrate upgrade a cache written by an older attntune to this one's schema, in place (readers\n"
    "          refuse an older file rather than change it; writers migrate it themselves)\n"
    "\n"
    "  --db FILE      the cache (default attntune.db); it must exist and be an attntune cache. A\n"
    "                 closed cache is one file that can be read where its folder is not writable\n"
    "  --gpu MODEL    only this GPU model (as 'attntune devices' names it)\n";

typedef struct cache_args {
  const char *db, *gpu, *format, *out, *into;
  int trials;
  char **rest;
  int n_rest;
} cache_args;

static int parse(int argc, char **argv, cache_args *a)
{
  enum { O_DB = 256, O_GPU, O_FORMAT, O_OUT, O_INTO, O_TRIALS, O_HELP };
  static const struct option options[] = {
      {"db", required_argument, NULL, O_DB},     {"gpu", required_argument, NULL, O_GPU},
      {"format", required_argument, NULL, O_FORMAT}, {"out", required_argument, NULL, O_OUT},
      {"into", required_argument, NULL, O_INTO}, {"trials", no_argument, NULL, O_TRIALS},
      {"help", no_argument, NULL, O_HELP},       {NULL, 0, NULL, 0}};
  int c;
  memset(a, 0, sizeof *a);
  a->db = "attntune.db";
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
    case O_DB: a->db = optarg; break;
    case O_GPU: a->gpu = optarg; break;
    case O_FORMAT: a->format = optarg; break;
    case O_OUT: a->out = optarg; break;
    case O_INTO: a->into = optarg; break;
    case O_TRIALS: a->trials = 1; break;
    case 'h':
    case O_HELP: fputs(USAGE, stdout); return 1;
    default:
      if (optopt) return tn_usage_error("cache", "option '%s' needs a value", argv[optind - 1]), -1;
      return tn_usage_error("cache", "unknown option '%s'", argv[optind - 1]), -1;
    }
  }
  a->rest = argv + optind;
  a->n_rest = argc - optind;
  return 0;
}

static double speedup(const cache_best *b)
{
  return isfinite(b->cudnn_ms) ? b->cudnn_ms / b->time_ms : NAN;
}

/* ---- list ------------------------------------------------------------------------------------ */

/* What `list` judges rows against: this build's templates and this machine's NVRTC and cuDNN,
 * as a library context here would (rt_row_usable). */
typedef struct list_ctx {
  cache_env now;
  int n;
} list_ctx;

static int print_best(void *user, const cache_best *b)
{
  list_ctx *l = user;
  char key[CACHE_ROW_KEY_CAP], why[384], note[400] = "";
  int stale = 0;
  cache_row_key(&b->shape, b->serving, key);
  l->n++;
  if (!rt_row_usable(b, &l->now, &stale, why, sizeof why)) snprintf(note, sizeof note, "  not used: %s", why);
  else if (stale) snprintf(note, sizeof note, "  stale: %s", why);
  printf("%-14s %-46s %-44s %10.4f %9.1f %10.4f %7.2fx%s\n", b->env.gpu_model, key, b->impl, b->time_ms, b->tflops,
         b->cudnn_ms, speedup(b), note);
  return 0;
}

static int open_read(const cache_args *a, cache_db **db)
{
  at_status rc = cache_open(a->db, CACHE_READ, db);
  return rc == AT_OK ? 0 : tn_fail_exit("cache", rc);
}

static int empty_message(cache_db *db, const cache_args *a)
{
  char models[512];
  int n = 0;
  if (cache_models(db, models, sizeof models, &n) == AT_OK && n > 0 && a->gpu)
    fprintf(stderr, "attntune cache: %s has no results for GPU '%s'; it holds results for: %s\n",
            a->db, a->gpu, models);
  else
    fprintf(stderr, "attntune cache: %s holds no tuning results yet (run 'attntune tune')\n", a->db);
  return TN_EXIT_RUNTIME;
}

static int cmd_list(const cache_args *a)
{
  cache_db *db;
  list_ctx l;
  int code = open_read(a, &db);
  if (code) return code;
  memset(&l, 0, sizeof l);
  gen_templates_version(l.now.template_version, sizeof l.now.template_version);
  rt_nvrtc_version_text(l.now.nvrtc, sizeof l.now.nvrtc);
  rt_cudnn_version_text(l.now.cudnn, sizeof l.now.cudnn);
  printf("%-14s %-46s %-44s %10s %9s %10s %8s\n", "gpu", "shape", "best", "best_ms", "TFLOP/s",
         "cudnn_ms", "speedup");
  at_status rc = cache_each_best(db, a->gpu, print_best, &l);
  if (rc != AT_OK) code = tn_fail_exit("cache", rc);
  else if (l.n == 0) code = empty_message(db, a);
  cache_close(db);
  return code;
}

/* ---- show ------------------------------------------------------------------------------------ */

typedef struct show_ctx {
  const char *key, *gpu;
  int n;
} show_ctx;

static int print_trial(void *user, const cache_env *env, const cache_trial *t)
{
  const char *gpu_model = env->gpu_model;
  show_ctx *s = user;
  char key[CACHE_ROW_KEY_CAP];
  cache_row_key(&t->shape, t->serving, key);
  if (strcmp(key, s->key) != 0 || (s->gpu && strcmp(gpu_model, s->gpu) != 0)) return 0;
  s->n++;
  printf("%-14s %-44s %-15s %10.4f %9.1f %9.2e %9.2e %5d %6d  %.80s\n", gpu_model, t->impl,
         cache_status_name(t->status), t->time_ms, t->tflops, t->err_naive, t->err_cudnn,
         t->registers, t->reps, t->message);
  return 0;
}

static int cmd_show(const cache_args *a)
{
  if (a->n_rest != 1) return tn_usage_error("cache", "show needs one shape key (see 'attntune cache list')");
  cache_db *db;
  int code = open_read(a, &db);
  if (code) return code;
  show_ctx s = {a->rest[0], a->gpu, 0};
  printf("%-14s %-44s %-15s %10s %9s %9s %9s %5s %6s  %s\n", "gpu", "impl", "status", "time_ms",
         "TFLOP/s", "err_naive", "err_cudnn", "regs", "reps", "message");
  at_status rc = cache_each_trial(db, a->gpu, print_trial, &s);
  if (rc != AT_OK) code = tn_fail_exit("cache", rc);
  else if (s.n == 0) {
    fprintf(stderr, "attntune cache: no trials for shape '%s' in %s\n", a->rest[0], a->db);
    code = TN_EXIT_RUNTIME;
  }
  cache_close(db);
  return code;
}

/* ---- export ------------------------------------------------------------------------------- */

typedef struct export_ctx {
  FILE *out;
  int json, n;
} export_ctx;

static void print_number(FILE *f, double x, int json)
{
  if (isfinite(x)) fprintf(f, "%.6g", x);
  else fputs(json ? "null" : "", f);
}

/* dtype is the cache's one word for the dtypes: "bf16", or "bf16.kve4m3" for an FP8 KV cache. */
static void print_shape_fields(FILE *f, const at_shape *s, int json)
{
  const char *dtypes = at_dtypes_name(s->dtype, s->kv_dtype);
  if (json)
    fprintf(f, "\"batch\": %d, \"q_len\": %d, \"kv_len\": %d, \"q_heads\": %d, \"kv_heads\": %d, "
               "\"head_dim\": %d, \"dtype\": \"%s\", \"mask\": \"%s\", \"lse\": %s",
            s->batch, s->q_len, s->kv_len, s->q_heads, s->kv_heads, s->head_dim, dtypes, at_mask_name(s->mask),
            s->with_lse ? "true" : "false");
  else
    fprintf(f, "%d,%d,%d,%d,%d,%d,%s,%s,%d", s->batch, s->q_len, s->kv_len, s->q_heads,
            s->kv_heads, s->head_dim, dtypes, at_mask_name(s->mask), s->with_lse);
}

static int export_best(void *user, const cache_best *b)
{
  export_ctx *e = user;
  FILE *f = e->out;
  char key[CACHE_ROW_KEY_CAP];
  cache_row_key(&b->shape, b->serving, key);
  if (e->json) {
    fprintf(f, "%s\n  {\"gpu\": \"%s\", \"shape\": \"%s\", ", e->n ? "," : "", b->env.gpu_model, key);
    print_shape_fields(f, &b->shape, 1);
    fprintf(f, ", \"impl\": \"%s\", \"time_ms\": ", b->impl);
    print_number(f, b->time_ms, 1);
    fputs(", \"tflops\": ", f), print_number(f, b->tflops, 1);
    fputs(", \"cudnn_ms\": ", f), print_number(f, b->cudnn_ms, 1);
    fputs(", \"speedup\": ", f), print_number(f, speedup(b), 1);
    fputs(", \"err_naive\": ", f), print_number(f, b->err_naive, 1);
    fputs(", \"err_cudnn\": ", f), print_number(f, b->err_cudnn, 1);
    fprintf(f, ", \"cudnn_version\": \"%s\", \"driver\": \"%s\", \"templates\": \"%s\"}", b->env.cudnn,
            b->env.driver, b->env.template_version);
  } else {
    fprintf(f, "%s,%s,", b->env.gpu_model, key);
    print_shape_fields(f, &b->shape, 0);
    fprintf(f, ",%s,", b->impl);
    print_number(f, b->time_ms, 0), fputc(',', f);
    print_number(f, b->tflops, 0), fputc(',', f);
    print_number(f, b->cudnn_ms, 0), fputc(',', f);
    print_number(f, speedup(b), 0), fputc(',', f);
    print_number(f, b->err_naive, 0), fputc(',', f);
    print_number(f, b->err_cudnn, 0);
    fprintf(f, ",%s,%s,%s\n", b->env.cudnn, b->env.driver, b->env.template_version);
  }
  e->n++;
  return 0;
}

static int export_trial(void *user, const cache_env *env, const cache_trial *t)
{
  const char *gpu = env->gpu_model;
  export_ctx *e = user;
  FILE *f = e->out;
  char key[CACHE_ROW_KEY_CAP];
  cache_row_key(&t->shape, t->serving, key);
  if (e->json) {
    fprintf(f, "%s\n  {\"gpu\": \"%s\", \"shape\": \"%s\", ", e->n ? "," : "", gpu, key);
    print_shape_fields(f, &t->shape, 1);
    fprintf(f, ", \"impl\": \"%s\", \"status\": \"%s\", \"time_ms\": ", t->impl, cache_status_name(t->status));
    print_number(f, t->time_ms, 1);
    fputs(", \"tflops\": ", f), print_number(f, t->tflops, 1);
    fputs(", \"err_naive\": ", f), print_number(f, t->err_naive, 1);
    fputs(", \"err_cudnn\": ", f), print_number(f, t->err_cudnn, 1);
    fprintf(f, ", \"registers\": %d, \"reps\": %d}", t->registers, t->reps);
  } else {
    fprintf(f, "%s,%s,", gpu, key);
    print_shape_fields(f, &t->shape, 0);
    fprintf(f, ",%s,%s,", t->impl, cache_status_name(t->status));
    print_number(f, t->time_ms, 0), fputc(',', f);
    print_number(f, t->tflops, 0), fputc(',', f);
    print_number(f, t->err_naive, 0), fputc(',', f);
    print_number(f, t->err_cudnn, 0);
    fprintf(f, ",%d,%d\n", t->registers, t->reps);
  }
  e->n++;
  return 0;
}

static int cmd_export(const cache_args *a)
{
  if (!a->format || (strcmp(a->format, "csv") && strcmp(a->format, "json")))
    return tn_usage_error("cache", "export needs --format csv or json (got '%s')", a->format ? a->format : "");
  cache_db *db;
  int code = open_read(a, &db);
  if (code) return code;
  export_ctx e = {stdout, strcmp(a->format, "json") == 0, 0};
  if (a->out && !(e.out = fopen(a->out, "w"))) {
    cache_close(db);
    fprintf(stderr, "attntune cache: cannot write '%s'\n", a->out);
    return TN_EXIT_RUNTIME;
  }
  const char *shape_cols = "batch,q_len,kv_len,q_heads,kv_heads,head_dim,dtype,mask,lse";
  if (e.json) fputs(a->trials ? "{\"trials\": [" : "{\"best\": [", e.out);
  else if (a->trials)
    fprintf(e.out, "gpu,shape,%s,impl,status,time_ms,tflops,err_naive,err_cudnn,registers,reps\n", shape_cols);
  else
    fprintf(e.out, "gpu,shape,%s,impl,time_ms,tflops,cudnn_ms,speedup,err_naive,err_cudnn,cudnn,driver,templates\n",
            shape_cols);
  at_status rc = a->trials ? cache_each_trial(db, a->gpu, export_trial, &e)
                           : cache_each_best(db, a->gpu, export_best, &e);
  if (e.json) fputs("\n]}\n", e.out);
  if (rc != AT_OK) code = tn_fail_exit("cache", rc);
  if (e.out != stdout && fclose(e.out) != 0) code = TN_EXIT_RUNTIME;
  cache_close(db);
  return code;
}

/* ---- merge, prune ------------------------------------------------------------------------- */

static int cmd_merge(const cache_args *a)
{
  if (!a->into) return tn_usage_error("cache", "merge needs --into FILE");
  if (a->n_rest < 1) return tn_usage_error("cache", "merge needs at least one input file");
  at_status rc = cache_merge((const char *const *)a->rest, a->n_rest, a->into);
  if (rc != AT_OK) return tn_fail_exit("cache", rc);
  printf("merged %d file%s into %s\n", a->n_rest, a->n_rest == 1 ? "" : "s", a->into);
  return TN_EXIT_OK;
}

static int cmd_prune(const cache_args *a)
{
  char version[96];
  cache_db *db;
  int removed = 0;
  gen_templates_version(version, sizeof version);
  at_status rc = cache_open(a->db, CACHE_WRITE_EXISTING, &db); /* never creates */
  if (rc == AT_OK) rc = cache_prune(db, version, &removed);
  cache_close(db);
  if (rc != AT_OK) return tn_fail_exit("cache", rc);
  printf("removed %d row%s not measured with templates %s\n", removed, removed == 1 ? "" : "s", version);
  return TN_EXIT_OK;
}

static int cmd_migrate(const cache_args *a)
{
  cache_db *db;
  at_status rc = cache_open(a->db, CACHE_WRITE_EXISTING, &db); /* migrates; never creates */
  if (rc != AT_OK) return tn_fail_exit("cache", rc);
  int was = cache_opened_version(db), now = cache_schema_version(db);
  cache_close(db);
  if (was == now) printf("%s is at cache schema version %d already\n", a->db, now);
  else printf("migrated %s from cache schema version %d to %d\n", a->db, was, now);
  return TN_EXIT_OK;
}

int tn_cmd_cache(int argc, char **argv)
{
  if (argc < 2) return tn_usage_error("cache", "which action? (list, show, export, merge, prune, migrate)");
  const char *action = argv[1];
  if (strcmp(action, "--help") == 0 || strcmp(action, "-h") == 0) return fputs(USAGE, stdout), TN_EXIT_OK;
  cache_args a;
  int parsed = parse(argc - 1, argv + 1, &a);
  if (parsed) return parsed > 0 ? TN_EXIT_OK : TN_EXIT_USAGE;
  /* --db empty or a directory is a usage error, as for tune and report (merge names its files
   * without --db). */
  static const char *const DB_ACTIONS[] = {"list", "show", "export", "prune", "migrate"};
  for (size_t i = 0; i < sizeof DB_ACTIONS / sizeof *DB_ACTIONS; i++)
    if (strcmp(action, DB_ACTIONS[i]) == 0 && !tn_check_db_path("cache", a.db)) return TN_EXIT_USAGE;
  if (strcmp(action, "list") == 0) return a.n_rest ? tn_usage_error("cache", "unexpected argument '%s'", a.rest[0]) : cmd_list(&a);
  if (strcmp(action, "show") == 0) return cmd_show(&a);
  if (strcmp(action, "export") == 0) return cmd_export(&a);
  if (strcmp(action, "merge") == 0) return cmd_merge(&a);
  if (strcmp(action, "prune") == 0) return cmd_prune(&a);
  if (strcmp(action, "migrate") == 0)
    return a.n_rest ? tn_usage_error("cache", "unexpected argument '%s'", a.rest[0]) : cmd_migrate(&a);
  return tn_usage_error("cache", "unknown action '%s' (expected list, show, export, merge, prune, migrate)", action);
}
