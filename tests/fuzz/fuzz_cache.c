/*
 * fuzz_cache.c — libFuzzer target: the SQLite cache reader on corrupt and hostile files. Each input
 * is written to a temporary file, opened read-only (as applications and `attntune report` open a
 * cache), and everything is read back: the schema version, the GPU models, every best row and
 * every trial, and then for each of them (the first 32) the lookups by shape (best, trial, count,
 * done) and by variant (cubin). Seeds: small caches written through cache.h by tests/fuzz/make_seeds.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_path[64], g_wal[80], g_shm[80];

static void check_shape(const at_shape *s)
{
  char key[160];
  at_shape_key(s, key, sizeof key); /* any ints a hostile row holds */
  (void)at_shape_check(s);
}

/* The rows seen, looked up again once the iteration is over. Not from inside the visitors: the
 * project's callers run no query there, and on a corrupt file a nested query's SQLITE_CORRUPT
 * leaves SQLite 3.40's outer iteration returning its last rows forever (reported with this
 * target; a finding of the harness's making, not of any caller's). */
enum { MAX_ROWS = 32 };
typedef struct rows {
  int n_best, n_trials;
  cache_best best[MAX_ROWS]; /* without their cubins */
  cache_env env[MAX_ROWS];
  cache_trial trial[MAX_ROWS];
} rows;

static int visit_best(void *user, const cache_best *b)
{
  rows *r = user;
  check_shape(&b->shape);
  if ((b->cubin == NULL) != (b->cubin_size == 0)) abort();
  if (b->cubin_size) {
    volatile const unsigned char *p = b->cubin; /* the whole blob is readable */
    (void)p[0], (void)p[b->cubin_size - 1];
  }
  if (r->n_best < MAX_ROWS) {
    r->best[r->n_best] = *b;
    r->best[r->n_best].cubin = NULL, r->best[r->n_best].cubin_size = 0;
    r->n_best++;
  }
  return 0;
}

static int visit_trial(void *user, const cache_env *env, const cache_trial *t)
{
  rows *r = user;
  check_shape(&t->shape);
  if (!strcmp(cache_status_name(t->status), "?")) abort(); /* the reader refuses unknown statuses */
  if (r->n_trials < MAX_ROWS) {
    r->env[r->n_trials] = *env;
    r->trial[r->n_trials++] = *t;
  }
  return 0;
}

static void look_up(cache_db *db, const rows *r)
{
  for (int i = 0; i < r->n_best; i++) {
    const cache_best *b = &r->best[i];
    cache_best again;
    int found = 0;
    if (cache_get_best(db, b->env.gpu_model, &b->shape, NULL, &again, &found) == AT_OK && found)
      cache_best_clear(&again);
    void *cubin = NULL;
    size_t n = 0;
    if (cache_get_cubin(db, b->impl, b->arch, b->env.template_version, &cubin, &n, &found) == AT_OK && found &&
        (!cubin || !n))
      abort();
    free(cubin);
  }
  for (int i = 0; i < r->n_trials; i++) {
    cache_trial again;
    int found = 0, count = 0, done = 0;
    (void)cache_find_trial(db, &r->env[i], &r->trial[i].shape, NULL, r->trial[i].impl, &found, &again, NULL);
    (void)cache_count_trials(db, &r->env[i], &r->trial[i].shape, NULL, &count);
    (void)cache_is_done(db, &r->env[i], &r->trial[i].shape, NULL, &done);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (!g_path[0]) {
    /* Memory-backed where there is one: every input is a file write, an open and a few queries. */
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_path, sizeof g_path, "%s/attntune-fuzz-cache.%ld.db", dir, (long)getpid());
    snprintf(g_wal, sizeof g_wal, "%s-wal", g_path);
    snprintf(g_shm, sizeof g_shm, "%s-shm", g_path);
  }
  unlink(g_wal);
  unlink(g_shm);
  FILE *f = fopen(g_path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  if (fclose(f) != 0) abort();
  cache_db *db = NULL;
  if (cache_open(g_path, CACHE_READ, &db) == AT_OK) {
    if (!cache_is_read_only(db)) abort();
    (void)cache_schema_version(db);
    char models[256];
    int n_models = 0;
    (void)cache_models(db, models, sizeof models, &n_models);
    (void)cache_models(db, models, 1, &n_models);
    static rows r;
    r.n_best = r.n_trials = 0;
    (void)cache_each_best(db, NULL, visit_best, &r);
    (void)cache_each_trial(db, NULL, visit_trial, &r);
    (void)cache_each_best(db, "NVIDIA H200", visit_best, &r);
    look_up(db, &r);
    cache_close(db);
  } else if (db) {
    abort(); /* a failed open hands back no handle */
  }
  unlink(g_path);
  unlink(g_wal);
  unlink(g_shm);
  return 0;
}
