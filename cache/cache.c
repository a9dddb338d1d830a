/* cache.c — see cache.h. Every SQLite return code is checked through SQL_CHECK. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "cache/cache.h"
#include "core/core.h"

struct cache_db {
  sqlite3 *db;
  char path[1024];
  int read_only;
};

static at_status sql_fail(cache_db *c, int rc, const char *what, int line)
{
  return at_fail(AT_ERR_CACHE, "%s: %s failed: %s (SQLite %d, cache/cache.c:%d)", c->path, what,
                 c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc), rc, line);
}
#define SQL_CHECK(c, rc, what) ((rc) == SQLITE_OK || (rc) == SQLITE_DONE || (rc) == SQLITE_ROW \
                                 ? AT_OK : sql_fail((c), (rc), (what), __LINE__))

/* ---- schema ------------------------------------------------------------------------------ */

/* MIGRATIONS[i] takes a file from schema version i to i + 1. Append, never edit. */
static const char *const MIGRATIONS[] = {
    /* 0 -> 1 */
    "CREATE TABLE trials (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  gpu_model TEXT NOT NULL, cc TEXT NOT NULL, sm_count INTEGER NOT NULL,\n"
    "  driver TEXT NOT NULL, nvrtc TEXT NOT NULL, cudnn TEXT NOT NULL,\n"
    "  template_version TEXT NOT NULL,\n"
    "  shape_key TEXT NOT NULL,\n"
    "  batch INTEGER NOT NULL, q_len INTEGER NOT NULL, kv_len INTEGER NOT NULL,\n"
    "  q_heads INTEGER NOT NULL, kv_heads INTEGER NOT NULL, head_dim INTEGER NOT NULL,\n"
    "  dtype TEXT NOT NULL, mask TEXT NOT NULL, lse INTEGER NOT NULL,\n"
    "  impl TEXT NOT NULL,\n"
    "  status TEXT NOT NULL CHECK (status IN ('ok','invalid','compile_failed','crashed',\n"
    "                                          'timeout','wrong','unsupported','dropped')),\n"
    "  time_ms REAL, tflops REAL, err_naive REAL, err_cudnn REAL,\n"
    "  registers INTEGER, spill_bytes INTEGER, smem_bytes INTEGER,\n"
    "  reps INTEGER NOT NULL DEFAULT 0,\n"
    "  message TEXT NOT NULL DEFAULT '',\n"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),\n"
    "  UNIQUE (gpu_model, template_version, shape_key, impl)\n"
    ");\n"
    "CREATE TABLE best (\n"
    "  gpu_model TEXT NOT NULL, cc TEXT NOT NULL, sm_count INTEGER NOT NULL,\n"
    "  driver TEXT NOT NULL, nvrtc TEXT NOT NULL, cudnn TEXT NOT NULL,\n"
    "  template_version TEXT NOT NULL,\n"
    "  shape_key TEXT NOT NULL,\n"
    "  batch INTEGER NOT NULL, q_len INTEGER NOT NULL, kv_len INTEGER NOT NULL,\n"
    "  q_heads INTEGER NOT NULL, kv_heads INTEGER NOT NULL, head_dim INTEGER NOT NULL,\n"
    "  dtype TEXT NOT NULL, mask TEXT NOT NULL, lse INTEGER NOT NULL,\n"
    "  impl TEXT NOT NULL, time_ms REAL NOT NULL, tflops REAL NOT NULL,\n"
    "  cudnn_ms REAL, err_naive REAL, err_cudnn REAL,\n"
    "  arch TEXT NOT NULL, entry TEXT NOT NULL, cubin BLOB,\n"
    "  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),\n"
    "  PRIMARY KEY (gpu_model, template_version, shape_key)\n"
    ");\n"
    "CREATE TABLE done (\n"
    "  gpu_model TEXT NOT NULL, template_version TEXT NOT NULL, shape_key TEXT NOT NULL,\n"
    "  finished_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),\n"
    "  PRIMARY KEY (gpu_model, template_version, shape_key)\n"
    ");\n"
    "CREATE INDEX best_lookup ON best (gpu_model, dtype, head_dim, mask, q_heads, kv_heads);\n",
    /* 1 -> 2: compiled kernels by variant, for plans that use a variant no best row holds
     * (the family default, a nearby shape's winner) */
    "CREATE TABLE cubins (\n"
    "  impl TEXT NOT NULL, arch TEXT NOT NULL, template_version TEXT NOT NULL,\n"
    "  nvrtc TEXT NOT NULL, entry TEXT NOT NULL, cubin BLOB NOT NULL,\n"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),\n"
    "  PRIMARY KEY (impl, arch, template_version)\n"
    ");\n",
};
enum { N_MIGRATIONS = sizeof MIGRATIONS / sizeof *MIGRATIONS };
_Static_assert(N_MIGRATIONS == CACHE_SCHEMA_VERSION, "one migration per schema version");

static at_status exec(cache_db *c, const char *sql, const char *what)
{
  char *err = NULL;
  int rc = sqlite3_exec(c->db, sql, NULL, NULL, &err);
  if (rc != SQLITE_OK) {
    at_status st = at_fail(AT_ERR_CACHE, "%s: %s failed: %s (SQLite %d)", c->path, what,
                           err ? err : sqlite3_errstr(rc), rc);
    sqlite3_free(err);
    return st;
  }
  return AT_OK;
}

static at_status read_version(cache_db *c, int *version)
{
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &st, NULL);
  at_status s = SQL_CHECK(c, rc, "reading the schema version");
  if (s == AT_OK) {
    rc = sqlite3_step(st);
    s = SQL_CHECK(c, rc, "reading the schema version");
    *version = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  }
  sqlite3_finalize(st);
  return s;
}

/* Each migration and its version bump commit together, so a crash leaves a whole version. */
static at_status migrate(cache_db *c)
{
  int version = 0;
  at_status s = exec(c, "BEGIN IMMEDIATE", "starting the schema migration");
  if (s != AT_OK) return s;
  if ((s = read_version(c, &version)) != AT_OK) goto fail;
  if (version > CACHE_SCHEMA_VERSION) {
    s = at_fail(AT_ERR_CACHE, "%s has cache schema version %d, newer than this attntune knows (%d); "
                "use a newer attntune", c->path, version, CACHE_SCHEMA_VERSION);
    goto fail;
  }
  for (; version < CACHE_SCHEMA_VERSION; version++) {
    char bump[64];
    if ((s = exec(c, MIGRATIONS[version], "migrating the cache schema")) != AT_OK) goto fail;
    snprintf(bump, sizeof bump, "PRAGMA user_version = %d", version + 1);
    if ((s = exec(c, bump, "setting the schema version")) != AT_OK) goto fail;
  }
  return exec(c, "COMMIT", "committing the schema migration");
fail:
  sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
  return s;
}

at_status cache_open(const char *path, int read_only, cache_db **out)
{
  *out = NULL;
  cache_db *c = calloc(1, sizeof *c);
  if (!c) return at_fail(AT_ERR_NOMEM, "no memory for a cache handle");
  snprintf(c->path, sizeof c->path, "%s", path);
  c->read_only = read_only;
  struct stat st;
  if (read_only && stat(path, &st) != 0) {
    free(c);
    return at_fail(AT_ERR_IO, "cache file '%s' does not exist", path);
  }
  int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path, &c->db, flags | SQLITE_OPEN_FULLMUTEX, NULL);
  at_status s = SQL_CHECK(c, rc, "opening the cache");
  if (s == AT_OK) s = SQL_CHECK(c, sqlite3_busy_timeout(c->db, 30000), "setting the busy timeout");
  if (s == AT_OK && !read_only) s = exec(c, "PRAGMA journal_mode = WAL", "switching to WAL");
  if (s == AT_OK && !read_only) s = exec(c, "PRAGMA synchronous = NORMAL", "setting synchronous");
  if (s == AT_OK && !read_only) s = migrate(c);
  if (s == AT_OK && read_only) {
    int version = 0;
    s = read_version(c, &version);
    if (s == AT_OK && version != CACHE_SCHEMA_VERSION)
      s = at_fail(AT_ERR_CACHE, "%s has cache schema version %d, this attntune reads %d%s", path,
                  version, CACHE_SCHEMA_VERSION,
                  version == 0 ? " (is it an attntune cache?)" : "; open it writable once to migrate");
  }
  if (s != AT_OK) {
    cache_close(c);
    return s;
  }
  *out = c;
  return AT_OK;
}

void cache_close(cache_db *c)
{
  if (!c) return;
  if (c->db) sqlite3_close(c->db);
  free(c);
}

int cache_schema_version(cache_db *c)
{
  int v = -1;
  return read_version(c, &v) == AT_OK ? v : -1;
}

/* ---- statuses ---------------------------------------------------------------------------- */

static const char *const STATUS_NAMES[] = {"ok",      "invalid", "compile_failed", "crashed",
                                           "timeout", "wrong",   "unsupported",    "dropped"};

const char *cache_status_name(cache_status s)
{
  return (unsigned)s < sizeof STATUS_NAMES / sizeof *STATUS_NAMES ? STATUS_NAMES[s] : "?";
}

at_status cache_status_parse(const char *text, cache_status *out)
{
  for (int i = 0; i < (int)(sizeof STATUS_NAMES / sizeof *STATUS_NAMES); i++)
    if (strcmp(text, STATUS_NAMES[i]) == 0) return *out = (cache_status)i, AT_OK;
  return at_fail(AT_ERR_CACHE, "unknown trial status '%s'", text);
}

/* ---- binding helpers --------------------------------------------------------------------- */

static at_status prepare(cache_db *c, const char *sql, sqlite3_stmt **st)
{
  return SQL_CHECK(c, sqlite3_prepare_v2(c->db, sql, -1, st, NULL), "preparing a statement");
}

static int bind_text(sqlite3_stmt *st, int i, const char *v)
{
  return sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
}

static int bind_real_or_null(sqlite3_stmt *st, int i, double v)
{
  return isfinite(v) ? sqlite3_bind_double(st, i, v) : sqlite3_bind_null(st, i);
}

static double column_real_or_nan(sqlite3_stmt *st, int i)
{
  return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static void copy_column(sqlite3_stmt *st, int i, char *buf, size_t size)
{
  const unsigned char *t = sqlite3_column_text(st, i);
  snprintf(buf, size, "%s", t ? (const char *)t : "");
}

/* Binds env (7 columns) at first..first+6 and shape (10 columns) after. Returns the next index. */
static int bind_env_shape(sqlite3_stmt *st, int first, const cache_env *e, const at_shape *s, int *rc)
{
  char cc[16], key[160];
  snprintf(cc, sizeof cc, "%d.%d", e->cc_major, e->cc_minor);
  at_shape_key(s, key, sizeof key);
  int i = first, r = SQLITE_OK;
  r |= bind_text(st, i++, e->gpu_model);
  r |= bind_text(st, i++, cc);
  r |= sqlite3_bind_int(st, i++, e->sm_count);
  r |= bind_text(st, i++, e->driver);
  r |= bind_text(st, i++, e->nvrtc);
  r |= bind_text(st, i++, e->cudnn);
  r |= bind_text(st, i++, e->template_version);
  r |= bind_text(st, i++, key);
  r |= sqlite3_bind_int(st, i++, s->batch);
  r |= sqlite3_bind_int(st, i++, s->q_len);
  r |= sqlite3_bind_int(st, i++, s->kv_len);
  r |= sqlite3_bind_int(st, i++, s->q_heads);
  r |= sqlite3_bind_int(st, i++, s->kv_heads);
  r |= sqlite3_bind_int(st, i++, s->head_dim);
  r |= bind_text(st, i++, at_dtype_name(s->dtype));
  r |= bind_text(st, i++, at_mask_name(s->mask));
  r |= sqlite3_bind_int(st, i++, s->with_lse);
  *rc = r;
  return i;
}

#define ENV_SHAPE_COLUMNS                                                                        \
  "gpu_model, cc, sm_count, driver, nvrtc, cudnn, template_version, shape_key, batch, q_len, "   \
  "kv_len, q_heads, kv_heads, head_dim, dtype, mask, lse"

/* A stored name that this build cannot read (a row written by another program or version). */
static at_status bad_column(cache_db *c, const char *table, const char *column, const char *text)
{
  return at_fail(AT_ERR_CACHE, "%s: a %s row has %s '%s', which this build does not know", c->path, table,
                 column, text);
}

/* Reads the ENV_SHAPE_COLUMNS starting at column first. */
static at_status read_env_shape(cache_db *c, const char *table, sqlite3_stmt *st, int first, cache_env *e,
                                at_shape *s)
{
  char cc[16], text[32];
  int i = first;
  memset(e, 0, sizeof *e);
  memset(s, 0, sizeof *s);
  copy_column(st, i++, e->gpu_model, sizeof e->gpu_model);
  copy_column(st, i++, cc, sizeof cc);
  sscanf(cc, "%d.%d", &e->cc_major, &e->cc_minor);
  e->sm_count = sqlite3_column_int(st, i++);
  copy_column(st, i++, e->driver, sizeof e->driver);
  copy_column(st, i++, e->nvrtc, sizeof e->nvrtc);
  copy_column(st, i++, e->cudnn, sizeof e->cudnn);
  copy_column(st, i++, e->template_version, sizeof e->template_version);
  i++; /* shape_key: derived */
  s->batch = sqlite3_column_int(st, i++);
  s->q_len = sqlite3_column_int(st, i++);
  s->kv_len = sqlite3_column_int(st, i++);
  s->q_heads = sqlite3_column_int(st, i++);
  s->kv_heads = sqlite3_column_int(st, i++);
  s->head_dim = sqlite3_column_int(st, i++);
  copy_column(st, i++, text, sizeof text);
  if (at_dtype_parse(text, &s->dtype) != AT_OK) return bad_column(c, table, "dtype", text);
  copy_column(st, i++, text, sizeof text);
  if (at_mask_parse(text, &s->mask) != AT_OK) return bad_column(c, table, "mask", text);
  s->with_lse = sqlite3_column_int(st, i++);
  return AT_OK;
}

/* Run a statement that returns no rows, then finalize it. */
static at_status step_done(cache_db *c, sqlite3_stmt *st, int bind_rc, const char *what)
{
  at_status s = SQL_CHECK(c, bind_rc, what);
  if (s == AT_OK) {
    int rc = sqlite3_step(st);
    s = rc == SQLITE_DONE ? AT_OK : sql_fail(c, rc, what, __LINE__);
  }
  sqlite3_finalize(st);
  return s;
}

/* ---- trials -------------------------------------------------------------------------------- */

at_status cache_put_trial(cache_db *c, const cache_env *env, const cache_trial *t)
{
  static const char SQL[] =
      "INSERT OR REPLACE INTO trials (" ENV_SHAPE_COLUMNS ", impl, status, time_ms, tflops, "
      "err_naive, err_cudnn, registers, spill_bytes, smem_bytes, reps, message) VALUES "
      "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
  sqlite3_stmt *st = NULL;
  at_status s = prepare(c, SQL, &st);
  if (s != AT_OK) return s;
  int rc;
  int i = bind_env_shape(st, 1, env, &t->shape, &rc);
  rc |= bind_text(st, i++, t->impl);
  rc |= bind_text(st, i++, cache_status_name(t->status));
  rc |= bind_real_or_null(st, i++, t->time_ms);
  rc |= bind_real_or_null(st, i++, t->tflops);
  rc |= bind_real_or_null(st, i++, t->err_naive);
  rc |= bind_real_or_null(st, i++, t->err_cudnn);
  rc |= sqlite3_bind_int(st, i++, t->registers);
  rc |= sqlite3_bind_int(st, i++, t->spill_bytes);
  rc |= sqlite3_bind_int(st, i++, t->smem_bytes);
  rc |= sqlite3_bind_int(st, i++, t->reps);
  rc |= bind_text(st, i++, t->message);
  return step_done(c, st, rc, "recording a trial");
}

#define TRIAL_COLUMNS ENV_SHAPE_COLUMNS ", impl, status, time_ms, tflops, err_naive, err_cudnn, " \
                                        "registers, spill_bytes, smem_bytes, reps, message"

static at_status read_trial(cache_db *c, sqlite3_stmt *st, cache_env *env, cache_trial *t)
{
  char text[32];
  memset(t, 0, sizeof *t);
  at_status s = read_env_shape(c, "trials", st, 0, env, &t->shape);
  if (s != AT_OK) return s;
  int i = 17;
  copy_column(st, i++, t->impl, sizeof t->impl);
  copy_column(st, i++, text, sizeof text);
  if (cache_status_parse(text, &t->status) != AT_OK) return bad_column(c, "trials", "status", text);
  t->time_ms = column_real_or_nan(st, i++);
  t->tflops = column_real_or_nan(st, i++);
  t->err_naive = column_real_or_nan(st, i++);
  t->err_cudnn = column_real_or_nan(st, i++);
  t->registers = sqlite3_column_int(st, i++);
  t->spill_bytes = sqlite3_column_int(st, i++);
  t->smem_bytes = sqlite3_column_int(st, i++);
  t->reps = sqlite3_column_int(st, i++);
  copy_column(st, i++, t->message, sizeof t->message);
  return AT_OK;
}

/* Binds (gpu_model, template_version, shape_key) at 1..3. */
static int bind_identity(sqlite3_stmt *st, const cache_env *env, const at_shape *shape)
{
  char key[160];
  at_shape_key(shape, key, sizeof key);
  return bind_text(st, 1, env->gpu_model) | bind_text(st, 2, env->template_version) |
         bind_text(st, 3, key);
}

at_status cache_find_trial(cache_db *c, const cache_env *env, const at_shape *shape,
                           const char *impl, int *found, cache_trial *out)
{
  static const char SQL[] = "SELECT " TRIAL_COLUMNS " FROM trials WHERE gpu_model = ? AND "
                            "template_version = ? AND shape_key = ? AND impl = ?";
  sqlite3_stmt *st = NULL;
  *found = 0;
  at_status s = prepare(c, SQL, &st);
  if (s != AT_OK) return s;
  int rc = bind_identity(st, env, shape) | bind_text(st, 4, impl);
  if ((s = SQL_CHECK(c, rc, "looking up a trial")) == AT_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      cache_env e;
      *found = 1;
      if (out) s = read_trial(c, st, &e, out);
    } else if (rc != SQLITE_DONE) {
      s = sql_fail(c, rc, "looking up a trial", __LINE__);
    }
  }
  sqlite3_finalize(st);
  return s;
}

static at_status count_rows(cache_db *c, const char *sql, const cache_env *env,
                            const at_shape *shape, int *count)
{
  sqlite3_stmt *st = NULL;
  *count = 0;
  at_status s = prepare(c, sql, &st);
  if (s != AT_OK) return s;
  if ((s = SQL_CHECK(c, bind_identity(st, env, shape), "counting rows")) == AT_OK) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *count = sqlite3_column_int(st, 0);
    else s = sql_fail(c, rc, "counting rows", __LINE__);
  }
  sqlite3_finalize(st);
  return s;
}

at_status cache_count_trials(cache_db *c, const cache_env *env, const at_shape *shape, int *count)
{
  return count_rows(c, "SELECT count(*) FROM trials WHERE gpu_model = ? AND template_version = ? "
                       "AND shape_key = ?", env, shape, count);
}

/* ---- best ------------------------------------------------------------------------------------ */

static at_status put_best_row(cache_db *c, const cache_best *b)
{
  static const char SQL[] =
      "INSERT OR REPLACE INTO best (" ENV_SHAPE_COLUMNS ", impl, time_ms, tflops, cudnn_ms, "
      "err_naive, err_cudnn, arch, entry, cubin) VALUES "
      "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
  sqlite3_stmt *st = NULL;
  at_status s = prepare(c, SQL, &st);
  if (s != AT_OK) return s;
  int rc;
  int i = bind_env_shape(st, 1, &b->env, &b->shape, &rc);
  rc |= bind_text(st, i++, b->impl);
  rc |= sqlite3_bind_double(st, i++, b->time_ms);
  rc |= sqlite3_bind_double(st, i++, b->tflops);
  rc |= bind_real_or_null(st, i++, b->cudnn_ms);
  rc |= bind_real_or_null(st, i++, b->err_naive);
  rc |= bind_real_or_null(st, i++, b->err_cudnn);
  rc |= bind_text(st, i++, b->arch);
  rc |= bind_text(st, i++, b->entry);
  if (b->cubin && b->cubin_size) rc |= sqlite3_bind_blob(st, i++, b->cubin, (int)b->cubin_size, SQLITE_TRANSIENT);
  else rc |= sqlite3_bind_null(st, i++);
  return step_done(c, st, rc, "storing a best result");
}

static at_status best_time(cache_db *c, const cache_env *env, const at_shape *shape, double *ms)
{
  static const char SQL[] = "SELECT time_ms FROM best WHERE gpu_model = ? AND template_version = ? "
                            "AND shape_key = ?";
  sqlite3_stmt *st = NULL;
  *ms = INFINITY;
  at_status s = prepare(c, SQL, &st);
  if (s != AT_OK) return s;
  if ((s = SQL_CHECK(c, bind_identity(st, env, shape), "reading a best time")) == AT_OK) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *ms = sqlite3_column_double(st, 0);
    else if (rc != SQLITE_DONE) s = sql_fail(c, rc, "reading a best time", __LINE__);
  }
  sqlite3_finalize(st);
  return s;
}

at_status cache_put_best(cache_db *c, const cache_best *b, int *stored)
{
  double current;
  int dummy;
  if (!stored) stored = &dummy;
  *stored = 0;
  if (!isfinite(b->time_ms) || b->time_ms <= 0)
    return at_fail(AT_ERR_INVALID, "best result for %s has no valid time (%g ms)", b->impl, b->time_ms);
  /* Read and write in one transaction so two writers cannot both think they are faster. */
  at_status s = exec(c, "BEGIN IMMEDIATE", "starting a best update");
  if (s != AT_OK) return s;
  if ((s = best_time(c, &b->env, &b->shape, &current)) == AT_OK && b->time_ms < current) {
    s = put_best_row(c, b);
    *stored = s == AT_OK;
  }
  if (s != AT_OK) {
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    *stored = 0;
    return s;
  }
  return exec(c, "COMMIT", "committing a best update");
}

#define BEST_COLUMNS ENV_SHAPE_COLUMNS ", impl, time_ms, tflops, cudnn_ms, err_naive, err_cudnn, " \
                                       "arch, entry, cubin, updated_at"

static at_status read_best(cache_db *c, sqlite3_stmt *st, cache_best *b)
{
  memset(b, 0, sizeof *b);
  at_status s = read_env_shape(c, "best", st, 0, &b->env, &b->shape);
  if (s != AT_OK) return s;
  int i = 17;
  copy_column(st, i++, b->impl, sizeof b->impl);
  b->time_ms = sqlite3_column_double(st, i++);
  b->tflops = sqlite3_column_double(st, i++);
  b->cudnn_ms = column_real_or_nan(st, i++);
  b->err_naive = column_real_or_nan(st, i++);
  b->err_cudnn = column_real_or_nan(st, i++);
  copy_column(st, i++, b->arch, sizeof b->arch);
  copy_column(st, i++, b->entry, sizeof b->entry);
  int n = sqlite3_column_bytes(st, i);
  const void *blob = sqlite3_column_blob(st, i++);
  if (blob && n > 0) {
    b->cubin = malloc((size_t)n);
    if (!b->cubin) return at_fail(AT_ERR_NOMEM, "%s: no memory for a %d-byte cubin", c->path, n);
    memcpy(b->cubin, blob, (size_t)n);
    b->cubin_size = (size_t)n;
  }
  copy_column(st, i++, b->updated_at, sizeof b->updated_at);
  return AT_OK;
}

at_status cache_get_best(cache_db *c, const char *gpu_model, const at_shape *shape,
                         cache_best *out, int *found)
{
  static const char SQL[] = "SELECT " BEST_COLUMNS " FROM best WHERE gpu_model = ? AND "
                            "shape_key = ? ORDER BY updated_at DESC LIMIT 1";
  char key[160];
  sqlite3_stmt *st = NULL;
  *found = 0;
  memset(out, 0, sizeof *out); /* callers may clear it whether or not a row was found */
  at_shape_key(shape, key, sizeof key);
  at_status s = prepare(c, SQL, &st);
  if (s != AT_OK) return s;
  int rc = bind_text(st, 1, gpu_model) | bind_text(st, 2, key);
  if ((s = SQL_CHECK(c, rc, "looking up a best result")) == AT_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      s = read_best(c, st, out);
      *found = s == AT_OK;
    } else if (rc != SQLITE_DONE) {
      s = sql_fail(c, rc, "looking up a best result", __LINE__);
    }
  }
  sqlite3_finalize(st);
  return s;
}

void cache_best_clear(cache_best *b)
{
  free(b->cubin);
  b->cubin = NULL;
  b->cubin_size = 0;
}

/* ---- done marks -------------------------------------------------------------------------- */

at_status cache_mark_done(cache_db *c, const cache_env *env, const at_shape *shape)
{
  sqlite3_stmt *st = NULL;
  at_status s = prepare(c, "INSERT OR REPLACE INTO done (gpu_model, template_version, shape_key) "
                           "VALUES (?, ?, ?)", &st);
  if (s != AT_OK) return s;
  return step_done(c, st, bind_identity(st, env, shape), "marking a shape done");
}

at_status cache_is_done(cache_db *c, const cache_env *env, const at_shape *shape, int *done)
{
  return count_rows(c, "SELECT count(*) FROM done WHERE gpu_model = ? AND template_version = ? "
                       "AND shape_key = ?", env, shape, done);
}

at_status cache_forget_shape(cache_db *c, const cache_env *env, const at_shape *shape)
{
  static const char *const SQL[] = {
      "DELETE FROM trials WHERE gpu_model = ? AND template_version = ? AND shape_key = ?",
      "DELETE FROM best WHERE gpu_model = ? AND template_version = ? AND shape_key = ?",
      "DELETE FROM done WHERE gpu_model = ? AND template_version = ? AND shape_key = ?"};
  at_status s = exec(c, "BEGIN IMMEDIATE", "starting to forget a shape");
  for (int i = 0; i < 3 && s == AT_OK; i++) {
    sqlite3_stmt *st = NULL;
    if ((s = prepare(c, SQL[i], &st)) == AT_OK)
      s = step_done(c, st, bind_identity(st, env, shape), "forgetting a shape");
  }
  if (s != AT_OK) {
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return s;
  }
  return exec(c, "COMMIT", "committing a forgotten shape");
}

/* ---- iteration --------------------------------------------------------------------------- */

at_status cache_each_best(cache_db *c, const char *gpu_model, cache_best_visitor visit, void *user)
{
  static const char SQL[] = "SELECT " BEST_COLUMNS " FROM best WHERE ?1 IS NULL OR gpu_model = ?1 "
                            "ORDER BY gpu_model, dtype, head_dim, mask, q_heads, kv_heads, batch, "
                            "q_len, kv_len, lse";
  sqlite3_stmt *st = NULL;
  at_status s = prepare(c, SQL, &st);
  if (s != AT_OK) return s;
  int rc = gpu_model ? bind_text(st, 1, gpu_model) : sqlite3_bind_null(st, 1);
  if ((s = SQL_CHECK(c, rc, "listing best results")) != AT_OK) goto out;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    cache_best b;
    if ((s = read_best(c, st, &b)) != AT_OK) goto out;
    int stop = visit(user, &b);
    cache_best_clear(&b);
    if (stop) goto out;
  }
  if (rc != SQLITE_DONE) s = sql_fail(c, rc, "listing best results", __LINE__);
out:
  sqlite3_finalize(st);
  return s;
}

at_status cache_each_trial(cache_db *c, const char *gpu_model, cache_trial_visitor visit, void *user)
{
  static const char SQL[] = "SELECT " TRIAL_COLUMNS " FROM trials WHERE ?1 IS NULL OR "
                            "gpu_model = ?1 ORDER BY gpu_model, shape_key, time_ms IS NULL, time_ms, impl";
  sqlite3_stmt *st = NULL;
  at_status s = prepare(c, SQL, &st);
  if (s != AT_OK) return s;
  int rc = gpu_model ? bind_text(st, 1, gpu_model) : sqlite3_bind_null(st, 1);
  if ((s = SQL_CHECK(c, rc, "listing trials")) != AT_OK) goto out;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    cache_env env;
    cache_trial t;
    if ((s = read_trial(c, st, &env, &t)) != AT_OK) goto out;
    if (visit(user, &env, &t)) goto out;
  }
  if (rc != SQLITE_DONE) s = sql_fail(c, rc, "listing trials", __LINE__);
out:
  sqlite3_finalize(st);
  return s;
}

at_status cache_models(cache_db *c, char *buf, size_t size, int *n_models)
{
  sqlite3_stmt *st = NULL;
  size_t used = 0;
  *n_models = 0;
  if (size) buf[0] = '\0';
  at_status s = prepare(c, "SELECT DISTINCT gpu_model FROM trials UNION SELECT DISTINCT gpu_model "
                           "FROM best ORDER BY 1", &st);
  if (s != AT_OK) return s;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *m = (const char *)sqlite3_column_text(st, 0);
    int n = snprintf(buf + used, used < size ? size - used : 0, "%s%s", *n_models ? ", " : "", m ? m : "");
    if (n > 0) used += (size_t)n;
    ++*n_models;
  }
  if (rc != SQLITE_DONE) s = sql_fail(c, rc, "listing GPU models", __LINE__);
  sqlite3_finalize(st);
  return s;
}

/* ---- merge and prune ----------------------------------------------------------------------- */

static at_status merge_one(cache_db *into, const char *input)
{
  char sql[2048];
  char *quoted = sqlite3_mprintf("%Q", input);
  if (!quoted) return at_fail(AT_ERR_NOMEM, "no memory");
  snprintf(sql, sizeof sql, "ATTACH DATABASE %s AS src", quoted);
  sqlite3_free(quoted);
  at_status s = exec(into, sql, "attaching a cache to merge");
  if (s != AT_OK) return s;
  /* Trials: keep what `into` has, add the rest. Best: the faster row wins per key. */
  s = exec(into,
           "BEGIN IMMEDIATE;\n"
           "INSERT OR IGNORE INTO main.trials (" ENV_SHAPE_COLUMNS ", impl, status, time_ms, "
           "tflops, err_naive, err_cudnn, registers, spill_bytes, smem_bytes, reps, message, "
           "created_at) SELECT " ENV_SHAPE_COLUMNS ", impl, status, time_ms, tflops, err_naive, "
           "err_cudnn, registers, spill_bytes, smem_bytes, reps, message, created_at FROM src.trials;\n"
           "INSERT OR REPLACE INTO main.best SELECT s.* FROM src.best s LEFT JOIN main.best m "
           "ON m.gpu_model = s.gpu_model AND m.template_version = s.template_version AND "
           "m.shape_key = s.shape_key WHERE m.time_ms IS NULL OR s.time_ms < m.time_ms;\n"
           "INSERT OR IGNORE INTO main.done SELECT * FROM src.done;\n"
           "INSERT OR IGNORE INTO main.cubins SELECT * FROM src.cubins;\n"
           "COMMIT;",
           "merging");
  if (s != AT_OK) sqlite3_exec(into->db, "ROLLBACK", NULL, NULL, NULL);
  at_status d = exec(into, "DETACH DATABASE src", "detaching a merged cache");
  return s != AT_OK ? s : d;
}

at_status cache_merge(const char *const *inputs, int n_inputs, const char *into_path)
{
  cache_db *into = NULL;
  at_status s = AT_OK;
  /* Every input must exist and have this schema version before the output is touched. */
  for (int i = 0; i < n_inputs && s == AT_OK; i++) {
    cache_db *check = NULL;
    if ((s = cache_open(inputs[i], 1, &check)) == AT_OK) cache_close(check);
  }
  if (s != AT_OK) return s;
  s = cache_open(into_path, 0, &into);
  for (int i = 0; i < n_inputs && s == AT_OK; i++) s = merge_one(into, inputs[i]);
  cache_close(into);
  return s;
}

at_status cache_prune(cache_db *c, const char *current_template, int *removed)
{
  static const char *const SQL[] = {"DELETE FROM trials WHERE template_version <> ?1",
                                    "DELETE FROM best WHERE template_version <> ?1",
                                    "DELETE FROM done WHERE template_version <> ?1",
                                    "DELETE FROM cubins WHERE template_version <> ?1"};
  at_status s = exec(c, "BEGIN IMMEDIATE", "starting to prune");
  *removed = 0;
  for (size_t i = 0; i < sizeof SQL / sizeof *SQL && s == AT_OK; i++) {
    sqlite3_stmt *st = NULL;
    if ((s = prepare(c, SQL[i], &st)) != AT_OK) break;
    s = step_done(c, st, bind_text(st, 1, current_template), "pruning");
    if (s == AT_OK) *removed += sqlite3_changes(c->db);
  }
  if (s != AT_OK) {
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return s;
  }
  return exec(c, "COMMIT", "committing the prune");
}

/* ---- cubins ---------------------------------------------------------------------------------- */

at_status cache_put_cubin(cache_db *c, const char *impl, const char *arch, const char *template_version,
                          const char *nvrtc, const char *entry, const void *cubin, size_t size)
{
  sqlite3_stmt *st = NULL;
  at_status s = prepare(c, "INSERT OR REPLACE INTO cubins (impl, arch, template_version, nvrtc, "
                           "entry, cubin) VALUES (?, ?, ?, ?, ?, ?)", &st);
  if (s != AT_OK) return s;
  int rc = bind_text(st, 1, impl) | bind_text(st, 2, arch) | bind_text(st, 3, template_version) |
           bind_text(st, 4, nvrtc) | bind_text(st, 5, entry) |
           sqlite3_bind_blob(st, 6, cubin, (int)size, SQLITE_TRANSIENT);
  return step_done(c, st, rc, "storing a cubin");
}

at_status cache_get_cubin(cache_db *c, const char *impl, const char *arch, const char *template_version,
                          void **cubin, size_t *size, int *found)
{
  sqlite3_stmt *st = NULL;
  *found = 0;
  *cubin = NULL;
  *size = 0;
  /* A best row's cubin serves as well as one stored on its own. A best row's version joins
   * several parts with '.' (one per kernel family); a cubin's is one of those parts. */
  at_status s = prepare(c, "SELECT cubin FROM cubins WHERE impl = ?1 AND arch = ?2 AND "
                           "template_version = ?3 UNION ALL SELECT cubin FROM best WHERE impl = ?1 "
                           "AND arch = ?2 AND (template_version = ?3 OR instr('.' || template_version "
                           "|| '.', '.' || ?3 || '.') > 0) AND cubin IS NOT NULL LIMIT 1", &st);
  if (s != AT_OK) return s;
  int rc = bind_text(st, 1, impl) | bind_text(st, 2, arch) | bind_text(st, 3, template_version);
  if ((s = SQL_CHECK(c, rc, "looking up a cubin")) == AT_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      int n = sqlite3_column_bytes(st, 0);
      const void *blob = sqlite3_column_blob(st, 0);
      if (blob && n > 0 && (*cubin = malloc((size_t)n)) != NULL) {
        memcpy(*cubin, blob, (size_t)n);
        *size = (size_t)n;
        *found = 1;
      } else if (blob && n > 0) {
        s = at_fail(AT_ERR_NOMEM, "%s: no memory for a %d-byte cubin", c->path, n);
      }
    } else if (rc != SQLITE_DONE) {
      s = sql_fail(c, rc, "looking up a cubin", __LINE__);
    }
  }
  sqlite3_finalize(st);
  return s;
}

int cache_is_read_only(const cache_db *c) { return c->read_only; }
