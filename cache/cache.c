/* cache.c — see cache.h. Every SQLite return code is checked through SQL_CHECK. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache/cache.h"
#include "core/core.h"

struct cache_db {
  sqlite3 *db;
  char path[1024];
  int read_only;
  int writer;          /* opened for writing and accepted: leaves rollback mode on close */
  int opened_version;  /* the schema version the file had when opened (before any migration) */
  char uri_params[32]; /* a reader's: "mode=ro" or "immutable=1" (merge attaches inputs so) */
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
    /* 2 -> 3: the shape keys of ragged and paged shapes carry a serving part (cache.h), which an
     * attntune of schema 2 would read as a padded shape of the same maxima; the bump alone makes
     * it refuse such a file ("newer than this attntune knows"). No table changes. */
    "-- schema 3: serving parts in shape keys\n",
};
enum { N_MIGRATIONS = sizeof MIGRATIONS / sizeof *MIGRATIONS };
_Static_assert(N_MIGRATIONS == CACHE_SCHEMA_VERSION, "one migration per schema version");

static void copy_column(sqlite3_stmt *st, int i, char *buf, size_t size);

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

/* One integer from a query; returns the SQLite code (SQLITE_OK on a row). */
static int query_int(sqlite3 *db, const char *sql, const char *arg, int *value)
{
  sqlite3_stmt *st = NULL;
  *value = 0;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  if (rc == SQLITE_OK && arg) rc = sqlite3_bind_text(st, 1, arg, -1, SQLITE_TRANSIENT);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *value = sqlite3_column_int(st, 0), rc = SQLITE_OK;
    else if (rc == SQLITE_DONE) rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK) rc = sqlite3_extended_errcode(db);
  sqlite3_finalize(st);
  return rc;
}

static at_status read_version(cache_db *c, int *version)
{
  int rc = query_int(c->db, "PRAGMA user_version", NULL, version);
  return rc == SQLITE_OK ? AT_OK : sql_fail(c, rc, "reading the schema version", __LINE__);
}

/* The tables (and the columns every version has had) that make a file an attntune cache. */
static const struct {
  int since; /* schema version that added the table */
  const char *table, *columns;
  int n_columns;
} REQUIRED_TABLES[] = {
    {1, "trials", "gpu_model,template_version,shape_key,impl,status,time_ms", 6},
    {1, "best", "gpu_model,template_version,shape_key,impl,time_ms,cubin", 6},
    {1, "done", "gpu_model,template_version,shape_key", 3},
    {2, "cubins", "impl,arch,template_version,cubin", 4},
};

/* Is the open file an attntune cache? Reads only. *version is its schema version; *empty is set
 * for a database with no schema at all (a 0-byte file). Anything else without attntune's tables
 * is refused by name. *sqlite_rc is the SQLite code when a read failed (0 otherwise). */
static at_status check_identity(cache_db *c, int *version, int *empty, int *sqlite_rc)
{
  int objects = 0, rc;
  *version = 0, *empty = 0, *sqlite_rc = 0;
  rc = query_int(c->db, "PRAGMA user_version", NULL, version);
  if (rc == SQLITE_OK) rc = query_int(c->db, "SELECT count(*) FROM sqlite_master", NULL, &objects);
  if ((rc & 0xff) == SQLITE_NOTADB)
    return at_fail(AT_ERR_CACHE, "%s is not an attntune cache: not a SQLite database", c->path);
  if (rc != SQLITE_OK) {
    *sqlite_rc = rc;
    return sql_fail(c, rc, "reading the schema version", __LINE__);
  }
  if (*version == 0 && objects == 0) {
    *empty = 1;
    return AT_OK;
  }
  /* attntune's schema has tables and indexes only. A view or trigger (say, 'best' as a view over
   * an endless recursive query) would run someone else's SQL inside every read. */
  int foreign = 0;
  if ((rc = query_int(c->db, "SELECT count(*) FROM sqlite_master WHERE type IN ('view', 'trigger')", NULL,
                      &foreign)) != SQLITE_OK) {
    *sqlite_rc = rc;
    return sql_fail(c, rc, "reading the schema", __LINE__);
  }
  if (foreign)
    return at_fail(AT_ERR_CACHE, "%s is not an attntune cache: it holds %d view(s) or trigger(s), which attntune's "
                   "schema never has; attntune neither reads nor writes it", c->path, foreign);
  for (size_t i = 0; i < sizeof REQUIRED_TABLES / sizeof *REQUIRED_TABLES; i++) {
    if (REQUIRED_TABLES[i].since > (*version ? *version : 1)) continue;
    char sql[256];
    int n = 0;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pragma_table_info(?1) WHERE instr(',%s,', ',' || name || ',') > 0",
             REQUIRED_TABLES[i].columns);
    if ((rc = query_int(c->db, sql, REQUIRED_TABLES[i].table, &n)) != SQLITE_OK) {
      *sqlite_rc = rc;
      return sql_fail(c, rc, "reading the schema", __LINE__);
    }
    if (n != REQUIRED_TABLES[i].n_columns)
      return at_fail(AT_ERR_CACHE, "%s is not an attntune cache: a SQLite database (user_version %d) without "
                     "attntune's '%s' table; attntune neither reads nor writes it", c->path, *version,
                     REQUIRED_TABLES[i].table);
  }
  if (*version > CACHE_SCHEMA_VERSION)
    return at_fail(AT_ERR_CACHE, "%s has cache schema version %d, newer than this attntune knows (%d); "
                   "use a newer attntune", c->path, *version, CACHE_SCHEMA_VERSION);
  return AT_OK;
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

/* A file: URI for path with the given query ("mode=ro"), escaping what a URI gives meaning to.
 * Free with sqlite3_free. */
static char *file_uri(const char *path, const char *query)
{
  size_t n = strlen(path);
  char *escaped = malloc(3 * n + 1), *q = escaped;
  if (!escaped) return NULL;
  for (const char *p = path; *p; p++) {
    if (*p == '%' || *p == '?' || *p == '#') q += sprintf(q, "%%%02x", (unsigned char)*p);
    else *q++ = *p;
  }
  *q = '\0';
  /* "file://" + "/abs" is "file:///abs" (empty authority); a relative path stays relative. */
  char *uri = sqlite3_mprintf("file:%s%s%s%s", path[0] == '/' ? "//" : "", escaped, query[0] ? "?" : "", query);
  free(escaped);
  return uri;
}

static at_status open_connection(cache_db *c, const char *query, int flags)
{
  char *uri = file_uri(c->path, query);
  if (!uri) return at_fail(AT_ERR_NOMEM, "no memory for a cache path");
  int rc = sqlite3_open_v2(uri, &c->db, flags | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX, NULL);
  sqlite3_free(uri);
  at_status s = SQL_CHECK(c, rc, "opening the cache");
  if (s == AT_OK) s = SQL_CHECK(c, sqlite3_busy_timeout(c->db, 30000), "setting the busy timeout");
  return s;
}

static int side_file_has_data(const char *path, const char *suffix)
{
  char side[1100];
  struct stat st;
  snprintf(side, sizeof side, "%s%s", path, suffix);
  return stat(side, &st) == 0 && st.st_size > 0;
}

/* Does the file's header say WAL mode (read and write versions 2)? */
static int in_wal_mode(const char *path)
{
  unsigned char header[100];
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t n = fread(header, 1, sizeof header, f);
  fclose(f);
  return n == sizeof header && memcmp(header, "SQLite format 3", 16) == 0 && header[18] == 2 && header[19] == 2;
}

/* A reader opens read-only. A file left in WAL mode cannot be opened so without a -shm that this
 * process can use (none, and the folder is not writable: SQLite says "attempt to write a readonly
 * database"); when neither -wal nor a rollback journal holds anything, the file alone is the whole
 * cache and is read as immutable. Otherwise the -wal's rows would be skipped: refused. */
static at_status open_reader(cache_db *c, int *version, int *empty)
{
  int sqlite_rc = 0;
  at_status s = AT_OK;
  if (in_wal_mode(c->path) && !side_file_has_data(c->path, "-wal")) {
    /* A reader of a WAL-mode file creates a -wal and a -shm beside it and cannot remove them:
     * whose file it is is settled first, reading it as immutable (nothing is in a -wal). */
    cache_db probe = *c;
    probe.db = NULL;
    if ((s = open_connection(&probe, "immutable=1", SQLITE_OPEN_READONLY)) == AT_OK)
      s = check_identity(&probe, version, empty, &sqlite_rc);
    sqlite3_close(probe.db);
    if (s != AT_OK) return s;
  }
  snprintf(c->uri_params, sizeof c->uri_params, "mode=ro");
  s = open_connection(c, c->uri_params, SQLITE_OPEN_READONLY);
  if (s == AT_OK) s = check_identity(c, version, empty, &sqlite_rc);
  int cannot_use_shm = (sqlite_rc & 0xff) == SQLITE_READONLY || (sqlite_rc & 0xff) == SQLITE_CANTOPEN;
  if (s == AT_OK || !cannot_use_shm) return s;
  if (side_file_has_data(c->path, "-wal") || side_file_has_data(c->path, "-journal"))
    return at_fail(AT_ERR_CACHE, "%s cannot be read here: %s%s holds results not yet in the file, and this "
                   "process cannot use its -shm (none, and no write access to the folder; SQLite %d: %s). "
                   "Open the file once where its folder is writable (any attntune command that writes it "
                   "folds the -wal in) and ship the file alone",
                   c->path, c->path, side_file_has_data(c->path, "-wal") ? "-wal" : "-journal", sqlite_rc,
                   sqlite3_errstr(sqlite_rc));
  sqlite3_close(c->db);
  c->db = NULL;
  snprintf(c->uri_params, sizeof c->uri_params, "immutable=1");
  s = open_connection(c, c->uri_params, SQLITE_OPEN_READONLY);
  if (s == AT_OK) s = check_identity(c, version, empty, &sqlite_rc);
  return s;
}

/* A writer works in WAL mode. Switching a closed file (rollback mode) to WAL takes an exclusive
 * lock, and SQLite answers SQLITE_BUSY there without waiting in the busy handler while another
 * process opens or closes the file: retried for as long as the busy timeout. */
static at_status enter_wal(cache_db *c)
{
  for (int waited_ms = 0;; waited_ms += 5) {
    sqlite3_stmt *st = NULL;
    char mode[16] = "";
    int rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) copy_column(st, 0, mode, sizeof mode);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW && strcmp(mode, "wal") == 0) return AT_OK;
    if ((rc != SQLITE_ROW && (rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) || waited_ms >= 30000)
      return rc == SQLITE_ROW ? at_fail(AT_ERR_CACHE, "%s: switching to WAL left journal mode '%s'", c->path, mode)
                              : sql_fail(c, rc, "switching to WAL", __LINE__);
    usleep(5000);
  }
}

at_status cache_open(const char *path, cache_mode mode, cache_db **out)
{
  *out = NULL;
  if (mode != CACHE_WRITE && mode != CACHE_READ && mode != CACHE_WRITE_EXISTING)
    return at_fail(AT_ERR_INVALID, "cache_open: unknown mode %d", (int)mode);
  cache_db *c = calloc(1, sizeof *c);
  if (!c) return at_fail(AT_ERR_NOMEM, "no memory for a cache handle");
  snprintf(c->path, sizeof c->path, "%s", path);
  c->read_only = mode == CACHE_READ;
  struct stat st;
  at_status s = AT_OK;
  if (stat(path, &st) != 0) {
    if (errno != ENOENT) s = at_fail(AT_ERR_IO, "cannot open cache file '%s': %s", path, strerror(errno));
    else if (mode != CACHE_WRITE) s = at_fail(AT_ERR_IO, "cache file '%s' does not exist", path);
  } else if (S_ISDIR(st.st_mode)) {
    s = at_fail(AT_ERR_IO, "cache file '%s' is a directory; give a file in it (e.g. '%s/attntune.db')", path, path);
  } else if (!S_ISREG(st.st_mode)) {
    s = at_fail(AT_ERR_IO, "cache file '%s' is not a regular file", path);
  }
  int version = 0, empty = 0, sqlite_rc = 0;
  if (s == AT_OK && c->read_only) {
    s = open_reader(c, &version, &empty);
    if (s == AT_OK && empty)
      s = at_fail(AT_ERR_CACHE, "%s is empty, not an attntune cache yet ('attntune tune' writes one)", path);
    else if (s == AT_OK && version < CACHE_SCHEMA_VERSION)
      s = at_fail(AT_ERR_CACHE, "%s has cache schema version %d, written by an older attntune; this one reads "
                  "version %d and does not change a file it opens read-only: upgrade it once where it can be "
                  "written with 'attntune cache migrate --db %s' (or open it with AT_CONTEXT_CACHE_WRITABLE)",
                  path, version, CACHE_SCHEMA_VERSION, path);
  } else if (s == AT_OK) {
    /* Whose file it is is settled before anything is written: switching to WAL writes the
     * header, migrating adds tables. */
    s = open_connection(c, "", SQLITE_OPEN_READWRITE | (mode == CACHE_WRITE ? SQLITE_OPEN_CREATE : 0));
    if (s == AT_OK) s = check_identity(c, &version, &empty, &sqlite_rc);
    if (s == AT_OK && empty && mode == CACHE_WRITE_EXISTING)
      s = at_fail(AT_ERR_CACHE, "%s is empty, not an attntune cache", path);
    c->opened_version = version;
    if (s == AT_OK) s = enter_wal(c);
    if (s == AT_OK) s = exec(c, "PRAGMA synchronous = NORMAL", "setting synchronous");
    if (s == AT_OK) s = migrate(c);
    c->writer = s == AT_OK;
  }
  if (s != AT_OK) {
    cache_close(c);
    return s;
  }
  *out = c;
  return AT_OK;
}

/* The journal mode the connection is in ("wal", "delete"), into buf. */
static at_status set_journal_mode(cache_db *c, const char *mode, char *buf, size_t size)
{
  char sql[64];
  sqlite3_stmt *st = NULL;
  snprintf(sql, sizeof sql, "PRAGMA journal_mode = %s", mode);
  buf[0] = '\0';
  int rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
  if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) copy_column(st, 0, buf, size);
  at_status s = SQL_CHECK(c, rc, "switching the journal mode");
  sqlite3_finalize(st);
  return s;
}

/* The last writer out leaves rollback mode: the switch checkpoints the -wal into the file and
 * removes it. While another connection has the file open the switch fails at once (no busy wait)
 * and a writer's close after it does it; when only readers are left, the checkpoint still moves
 * what it can into the file and empties the -wal, so the file alone holds every result. Two
 * writers closing at the same moment may each still see the other and both leave the file in
 * WAL mode; SQLite's checkpoint at the last close still empties the -wal, and readers open such
 * a file (tests/test_cache.c, the eight writers and the read-only directory). */
static void leave_wal(cache_db *c)
{
  char mode[16];
  sqlite3_busy_timeout(c->db, 0);
  if (set_journal_mode(c, "DELETE", mode, sizeof mode) != AT_OK || strcmp(mode, "delete") != 0)
    (void)sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
}

void cache_close(cache_db *c)
{
  if (!c) return;
  if (c->db && c->writer) leave_wal(c);
  if (c->db) sqlite3_close(c->db);
  free(c);
}

int cache_opened_version(const cache_db *c) { return c->opened_version; }

int cache_schema_version(cache_db *c)
{
  int v = -1;
  return read_version(c, &v) == AT_OK ? v : -1;
}

/* ---- staleness against cuDNN and NVRTC ---------------------------------------------------- */

/* A version this process knows and the measurement does not share. */
static int changed(const char *measured, const char *now) { return now[0] && strcmp(measured, now) != 0; }

/* "cuDNN 9.19.0", or "no cuDNN" for a measurement made without it. */
static const char *lib_text(const char *lib, const char *version, char *buf, size_t size)
{
  if (version[0]) snprintf(buf, size, "%s %s", lib, version);
  else snprintf(buf, size, "no %s", lib);
  return buf;
}

static void say(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(char *why, size_t size, const char *fmt, ...)
{
  if (!why || !size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
}

int cache_trial_stale(const cache_env *measured, const cache_env *now, const char *impl, char *why,
                      size_t why_size)
{
  char had[48], has[48];
  if (why && why_size) why[0] = '\0';
  if (strcmp(impl, "cudnn") == 0) {
    if (!changed(measured->cudnn, now->cudnn)) return 0;
    say(why, why_size, "timed with %s, this process has cuDNN %s", lib_text("cuDNN", measured->cudnn, had, sizeof had),
        now->cudnn);
    return 1;
  }
  if (!changed(measured->nvrtc, now->nvrtc)) return 0;
  say(why, why_size, "compiled with %s, this process has NVRTC %s", lib_text("NVRTC", measured->nvrtc, has, sizeof has),
      now->nvrtc);
  return 1;
}

int cache_best_stale(const cache_env *measured, const cache_env *now, const char *impl, char *why,
                     size_t why_size)
{
  char had[48];
  int cudnn_won = strcmp(impl, "cudnn") == 0;
  if (why && why_size) why[0] = '\0';
  if (changed(measured->cudnn, now->cudnn)) {
    lib_text("cuDNN", measured->cudnn, had, sizeof had);
    if (cudnn_won)
      say(why, why_size, "cuDNN measured fastest with %s, this process has cuDNN %s", had, now->cudnn);
    else
      say(why, why_size, "compared with %s, this process has cuDNN %s", had, now->cudnn);
    return 1;
  }
  if (changed(measured->nvrtc, now->nvrtc)) {
    lib_text("NVRTC", measured->nvrtc, had, sizeof had);
    if (cudnn_won)
      say(why, why_size, "cuDNN measured fastest against kernels compiled with %s, this process has NVRTC %s",
          had, now->nvrtc);
    else
      say(why, why_size, "kernels compiled with %s, this process has NVRTC %s", had, now->nvrtc);
    return 1;
  }
  return 0;
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

void cache_row_key(const at_shape *s, const char *serving, char key[CACHE_ROW_KEY_CAP])
{
  at_shape_key(s, key, CACHE_ROW_KEY_CAP);
  const size_t used = strlen(key);
  if (serving && serving[0]) snprintf(key + used, CACHE_ROW_KEY_CAP - used, "%s", serving);
}

/* Binds env (7 columns) at first..first+6 and shape (10 columns, with its serving part in the
 * key) after. Returns the next index. */
static int bind_env_shape(sqlite3_stmt *st, int first, const cache_env *e, const at_shape *s, const char *serving,
                          int *rc)
{
  char cc[16], key[160];
  snprintf(cc, sizeof cc, "%d.%d", e->cc_major, e->cc_minor);
  cache_row_key(s, serving, key);
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
  r |= bind_text(st, i++, at_dtypes_name(s->dtype, s->kv_dtype)); /* "bf16", "bf16.kve4m3" */
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

/* The serving part of a stored shape_key: what follows at_shape_key of the row's own columns. A
 * key that does not begin with it was not written by this cache (or its columns were edited). */
static at_status split_serving(cache_db *c, const char *table, const char *stored, const at_shape *s, char *serving)
{
  char key[160];
  at_shape_key(s, key, sizeof key);
  const size_t n = strlen(key);
  if (strncmp(stored, key, n) != 0 || (stored[n] && stored[n] != '.') || strlen(stored + n) >= CACHE_SERVING_CAP)
    return at_fail(AT_ERR_CACHE, "%s: a %s row has shape_key '%s', which does not match its columns (%s)", c->path,
                   table, stored, key);
  snprintf(serving, CACHE_SERVING_CAP, "%s", stored + n);
  return AT_OK;
}

/* Reads the ENV_SHAPE_COLUMNS starting at column first; serving gets the key's serving part. */
static at_status read_env_shape(cache_db *c, const char *table, sqlite3_stmt *st, int first, cache_env *e,
                                at_shape *s, char *serving)
{
  char cc[16], text[32], stored[160];
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
  copy_column(st, i++, stored, sizeof stored); /* checked against the columns below */
  s->batch = sqlite3_column_int(st, i++);
  s->q_len = sqlite3_column_int(st, i++);
  s->kv_len = sqlite3_column_int(st, i++);
  s->q_heads = sqlite3_column_int(st, i++);
  s->kv_heads = sqlite3_column_int(st, i++);
  s->head_dim = sqlite3_column_int(st, i++);
  copy_column(st, i++, text, sizeof text);
  if (at_dtypes_parse(text, &s->dtype, &s->kv_dtype) != AT_OK) return bad_column(c, table, "dtype", text);
  copy_column(st, i++, text, sizeof text);
  if (at_mask_parse(text, &s->mask) != AT_OK) return bad_column(c, table, "mask", text);
  s->with_lse = sqlite3_column_int(st, i++);
  return split_serving(c, table, stored, s, serving);
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
  int i = bind_env_shape(st, 1, env, &t->shape, t->serving, &rc);
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
  at_status s = read_env_shape(c, "trials", st, 0, env, &t->shape, t->serving);
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
static int bind_identity(sqlite3_stmt *st, const cache_env *env, const at_shape *shape, const char *serving)
{
  char key[160];
  cache_row_key(shape, serving, key);
  return bind_text(st, 1, env->gpu_model) | bind_text(st, 2, env->template_version) |
         bind_text(st, 3, key);
}

at_status cache_find_trial(cache_db *c, const cache_env *env, const at_shape *shape, const char *serving,
                           const char *impl, int *found, cache_trial *out, cache_env *measured)
{
  static const char SQL[] = "SELECT " TRIAL_COLUMNS " FROM trials WHERE gpu_model = ? AND "
                            "template_version = ? AND shape_key = ? AND impl = ?";
  sqlite3_stmt *st = NULL;
  *found = 0;
  at_status s = prepare(c, SQL, &st);
  if (s != AT_OK) return s;
  int rc = bind_identity(st, env, shape, serving) | bind_text(st, 4, impl);
  if ((s = SQL_CHECK(c, rc, "looking up a trial")) == AT_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      cache_env e;
      cache_trial t;
      *found = 1;
      s = read_trial(c, st, &e, &t);
      if (s == AT_OK && out) *out = t;
      if (s == AT_OK && measured) *measured = e;
    } else if (rc != SQLITE_DONE) {
      s = sql_fail(c, rc, "looking up a trial", __LINE__);
    }
  }
  sqlite3_finalize(st);
  return s;
}

static at_status count_rows(cache_db *c, const char *sql, const cache_env *env,
                            const at_shape *shape, const char *serving, int *count)
{
  sqlite3_stmt *st = NULL;
  *count = 0;
  at_status s = prepare(c, sql, &st);
  if (s != AT_OK) return s;
  if ((s = SQL_CHECK(c, bind_identity(st, env, shape, serving), "counting rows")) == AT_OK) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *count = sqlite3_column_int(st, 0);
    else s = sql_fail(c, rc, "counting rows", __LINE__);
  }
  sqlite3_finalize(st);
  return s;
}

at_status cache_count_trials(cache_db *c, const cache_env *env, const at_shape *shape, const char *serving, int *count)
{
  return count_rows(c, "SELECT count(*) FROM trials WHERE gpu_model = ? AND template_version = ? "
                       "AND shape_key = ?", env, shape, serving, count);
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
  int i = bind_env_shape(st, 1, &b->env, &b->shape, b->serving, &rc);
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

/* The time of the stored best row with best's identity, and whether that row is stale against
 * best's environment (INFINITY and 0 when there is none). */
static at_status best_time(cache_db *c, const cache_best *best, double *ms, int *stale)
{
  static const char SQL[] = "SELECT time_ms, impl, nvrtc, cudnn FROM best WHERE gpu_model = ? AND "
                            "template_version = ? AND shape_key = ?";
  sqlite3_stmt *st = NULL;
  *ms = INFINITY;
  *stale = 0;
  at_status s = prepare(c, SQL, &st);
  if (s != AT_OK) return s;
  if ((s = SQL_CHECK(c, bind_identity(st, &best->env, &best->shape, best->serving), "reading a best time")) == AT_OK) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      cache_env had = best->env;
      char impl[96];
      *ms = sqlite3_column_double(st, 0);
      copy_column(st, 1, impl, sizeof impl);
      copy_column(st, 2, had.nvrtc, sizeof had.nvrtc);
      copy_column(st, 3, had.cudnn, sizeof had.cudnn);
      *stale = cache_best_stale(&had, &best->env, impl, NULL, 0);
    } else if (rc != SQLITE_DONE) {
      s = sql_fail(c, rc, "reading a best time", __LINE__);
    }
  }
  sqlite3_finalize(st);
  return s;
}

at_status cache_put_best(cache_db *c, const cache_best *b, int *stored)
{
  double current;
  int dummy, stale = 0;
  if (!stored) stored = &dummy;
  *stored = 0;
  if (!isfinite(b->time_ms) || b->time_ms <= 0)
    return at_fail(AT_ERR_INVALID, "best result for %s has no valid time (%g ms)", b->impl, b->time_ms);
  /* Read and write in one transaction so two writers cannot both think they are faster. */
  at_status s = exec(c, "BEGIN IMMEDIATE", "starting a best update");
  if (s != AT_OK) return s;
  if ((s = best_time(c, b, &current, &stale)) == AT_OK && (stale || b->time_ms < current)) {
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
  at_status s = read_env_shape(c, "best", st, 0, &b->env, &b->shape, b->serving);
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

at_status cache_get_best(cache_db *c, const char *gpu_model, const at_shape *shape, const char *serving,
                         cache_best *out, int *found)
{
  static const char SQL[] = "SELECT " BEST_COLUMNS " FROM best WHERE gpu_model = ? AND "
                            "shape_key = ? ORDER BY updated_at DESC LIMIT 1";
  char key[160];
  sqlite3_stmt *st = NULL;
  *found = 0;
  memset(out, 0, sizeof *out); /* callers may clear it whether or not a row was found */
  cache_row_key(shape, serving, key);
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

at_status cache_mark_done(cache_db *c, const cache_env *env, const at_shape *shape, const char *serving)
{
  sqlite3_stmt *st = NULL;
  at_status s = prepare(c, "INSERT OR REPLACE INTO done (gpu_model, template_version, shape_key) "
                           "VALUES (?, ?, ?)", &st);
  if (s != AT_OK) return s;
  return step_done(c, st, bind_identity(st, env, shape, serving), "marking a shape done");
}

at_status cache_is_done(cache_db *c, const cache_env *env, const at_shape *shape, const char *serving, int *done)
{
  return count_rows(c, "SELECT count(*) FROM done WHERE gpu_model = ? AND template_version = ? "
                       "AND shape_key = ?", env, shape, serving, done);
}

at_status cache_forget_shape(cache_db *c, const cache_env *env, const at_shape *shape, const char *serving)
{
  static const char *const SQL[] = {
      "DELETE FROM trials WHERE gpu_model = ? AND template_version = ? AND shape_key = ?",
      "DELETE FROM best WHERE gpu_model = ? AND template_version = ? AND shape_key = ?",
      "DELETE FROM done WHERE gpu_model = ? AND template_version = ? AND shape_key = ?"};
  at_status s = exec(c, "BEGIN IMMEDIATE", "starting to forget a shape");
  for (int i = 0; i < 3 && s == AT_OK; i++) {
    sqlite3_stmt *st = NULL;
    if ((s = prepare(c, SQL[i], &st)) == AT_OK)
      s = step_done(c, st, bind_identity(st, env, shape, serving), "forgetting a shape");
  }
  if (s != AT_OK) {
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return s;
  }
  return exec(c, "COMMIT", "committing a forgotten shape");
}

at_status cache_forget_best(cache_db *c, const cache_env *env, const at_shape *shape, const char *serving)
{
  sqlite3_stmt *st = NULL;
  at_status s = prepare(c, "DELETE FROM best WHERE gpu_model = ? AND template_version = ? AND shape_key = ?", &st);
  if (s != AT_OK) return s;
  return step_done(c, st, bind_identity(st, env, shape, serving), "forgetting a best result");
}

/* One row of the best row and trials of a shape: what was measured, and in which environment. */
static at_status first_stale_row(cache_db *c, const char *sql, int is_best, const cache_env *env,
                                 const at_shape *shape, const char *serving, int *stale, char *why, size_t why_size)
{
  sqlite3_stmt *st = NULL;
  at_status s = prepare(c, sql, &st);
  if (s != AT_OK) return s;
  s = SQL_CHECK(c, bind_identity(st, env, shape, serving), "checking a shape for stale results");
  if (s != AT_OK) goto out;
  int rc = SQLITE_DONE;
  while (!*stale && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    cache_env had = *env;
    char impl[96], reason[384];
    copy_column(st, 0, impl, sizeof impl);
    copy_column(st, 1, had.nvrtc, sizeof had.nvrtc);
    copy_column(st, 2, had.cudnn, sizeof had.cudnn);
    *stale = is_best ? cache_best_stale(&had, env, impl, reason, sizeof reason)
                     : cache_trial_stale(&had, env, impl, reason, sizeof reason);
    if (*stale) say(why, why_size, "%s %s: %s", is_best ? "best" : "trial", impl, reason);
  }
  if (!*stale && rc != SQLITE_DONE) s = sql_fail(c, rc, "checking a shape for stale results", __LINE__);
out:
  sqlite3_finalize(st);
  return s;
}

at_status cache_shape_stale(cache_db *c, const cache_env *env, const at_shape *shape, const char *serving,
                            int *stale, char *why, size_t why_size)
{
  *stale = 0;
  if (why && why_size) why[0] = '\0';
  at_status s = first_stale_row(c, "SELECT impl, nvrtc, cudnn FROM best WHERE gpu_model = ? AND "
                                   "template_version = ? AND shape_key = ?", 1, env, shape, serving, stale, why,
                                 why_size);
  if (s == AT_OK && !*stale)
    s = first_stale_row(c, "SELECT impl, nvrtc, cudnn FROM trials WHERE gpu_model = ? AND "
                           "template_version = ? AND shape_key = ? AND impl IN ('cudnn', 'naive') ORDER BY impl",
                        0, env, shape, serving, stale, why, why_size);
  return s;
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

/* Adds one input (opened and checked as a reader: params says how to attach it) to `into`, a
 * new file that nobody else has open. Messages name the input and the output being made. */
static at_status merge_one(cache_db *into, const char *input, const char *params, const char *output)
{
  char *uri = file_uri(input, params);
  char *sql = uri ? sqlite3_mprintf("ATTACH DATABASE %Q AS src", uri) : NULL;
  sqlite3_free(uri);
  if (!sql) return at_fail(AT_ERR_NOMEM, "no memory");
  char *err = NULL;
  int rc = sqlite3_exec(into->db, sql, NULL, NULL, &err);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    at_status st = at_fail(AT_ERR_CACHE, "%s: attaching it to merge into %s failed: %s (SQLite %d)", input,
                           output, err ? err : sqlite3_errstr(rc), rc);
    sqlite3_free(err);
    return st;
  }
  /* Trials: keep what `into` has, add the rest. Best: the faster row wins per key. But two rows
   * of one key measured with different cuDNN or NVRTC versions do not compare (one of them is
   * stale wherever the other is current): the later measurement wins, trial or best. */
  rc = sqlite3_exec(into->db,
                    "BEGIN IMMEDIATE;\n"
                    "INSERT OR REPLACE INTO main.trials (" ENV_SHAPE_COLUMNS ", impl, status, time_ms, "
                    "tflops, err_naive, err_cudnn, registers, spill_bytes, smem_bytes, reps, message, "
                    "created_at) SELECT " ENV_SHAPE_COLUMNS ", impl, status, time_ms, tflops, err_naive, "
                    "err_cudnn, registers, spill_bytes, smem_bytes, reps, message, created_at FROM src.trials s "
                    "WHERE NOT EXISTS (SELECT 1 FROM main.trials m WHERE m.gpu_model = s.gpu_model AND "
                    "m.template_version = s.template_version AND m.shape_key = s.shape_key AND m.impl = s.impl "
                    "AND NOT ((m.cudnn <> s.cudnn OR m.nvrtc <> s.nvrtc) AND s.created_at > m.created_at));\n"
                    "INSERT OR REPLACE INTO main.best SELECT s.* FROM src.best s LEFT JOIN main.best m "
                    "ON m.gpu_model = s.gpu_model AND m.template_version = s.template_version AND "
                    "m.shape_key = s.shape_key WHERE m.time_ms IS NULL OR (m.cudnn = s.cudnn AND m.nvrtc = "
                    "s.nvrtc AND s.time_ms < m.time_ms) OR ((m.cudnn <> s.cudnn OR m.nvrtc <> s.nvrtc) AND "
                    "s.updated_at > m.updated_at);\n"
                    "INSERT OR IGNORE INTO main.done SELECT * FROM src.done;\n"
                    "INSERT OR IGNORE INTO main.cubins SELECT * FROM src.cubins;\n"
                    "COMMIT;",
                    NULL, NULL, &err);
  at_status s = AT_OK;
  if (rc != SQLITE_OK) {
    s = at_fail(AT_ERR_CACHE, "%s: merging it into %s failed: %s (SQLite %d); %s is left as it was", input,
                output, err ? err : sqlite3_errstr(rc), rc, output);
    sqlite3_free(err);
    sqlite3_exec(into->db, "ROLLBACK", NULL, NULL, NULL);
  }
  at_status d = exec(into, "DETACH DATABASE src", "detaching a merged cache");
  return s != AT_OK ? s : d;
}

static void remove_with_side_files(const char *path)
{
  static const char *const SUFFIXES[] = {"", "-wal", "-shm", "-journal"};
  for (int i = 0; i < 4; i++) {
    char p[PATH_MAX + 96];
    snprintf(p, sizeof p, "%s%s", path, SUFFIXES[i]);
    unlink(p);
  }
}

static at_status sync_path(const char *path, int flags)
{
  int fd = open(path, flags);
  if (fd < 0 || fsync(fd) != 0) {
    at_status s = at_fail(AT_ERR_IO, "cannot sync '%s': %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return s;
  }
  close(fd);
  return AT_OK;
}

/* Copies the output as it is into the new file (a consistent snapshot, through a reader). */
static at_status copy_existing(const char *from, sqlite3 *to_db, const char *to)
{
  cache_db *src = NULL;
  int version = 0, empty = 0;
  at_status s = AT_OK;
  if ((src = calloc(1, sizeof *src)) == NULL) return at_fail(AT_ERR_NOMEM, "no memory for a cache handle");
  snprintf(src->path, sizeof src->path, "%s", from);
  src->read_only = 1;
  if ((s = open_reader(src, &version, &empty)) == AT_OK && !empty) {
    sqlite3_backup *b = sqlite3_backup_init(to_db, "main", src->db, "main");
    int rc = b ? sqlite3_backup_step(b, -1) : sqlite3_errcode(to_db);
    int done = rc == SQLITE_DONE;
    rc = b ? sqlite3_backup_finish(b) : rc;
    if (!done || rc != SQLITE_OK)
      s = at_fail(AT_ERR_CACHE, "%s: copying it into %s failed: %s", from, to, sqlite3_errmsg(to_db));
  }
  cache_close(src);
  return s;
}

at_status cache_merge(const char *const *inputs, int n_inputs, const char *into_path)
{
  struct stat out_st, in_st;
  int out_exists = stat(into_path, &out_st) == 0;
  if (!out_exists && errno != ENOENT)
    return at_fail(AT_ERR_IO, "cannot use '%s' as the merge output: %s", into_path, strerror(errno));
  if (out_exists && !S_ISREG(out_st.st_mode))
    return at_fail(AT_ERR_IO, "merge output '%s' is not a regular file", into_path);
  /* Before anything is opened: the output must be none of the inputs (the same file by device
   * and inode, whatever the names). */
  for (int i = 0; i < n_inputs; i++) {
    if (stat(inputs[i], &in_st) != 0)
      return errno == ENOENT ? at_fail(AT_ERR_IO, "cache file '%s' does not exist", inputs[i])
                             : at_fail(AT_ERR_IO, "cannot read cache file '%s': %s", inputs[i], strerror(errno));
    if (out_exists && in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino) {
      if (strcmp(inputs[i], into_path) == 0)
        return at_fail(AT_ERR_INVALID, "the merge output %s is also an input; merge into a new file "
                       "(or one that is not an input)", into_path);
      return at_fail(AT_ERR_INVALID, "the merge output %s is also an input (%s is the same file); merge into "
                     "a new file (or one that is not an input)", into_path, inputs[i]);
    }
  }
  /* Every input must be a current cache, and the output, when it exists, an attntune cache. */
  at_status s = AT_OK;
  char (*params)[32] = calloc((size_t)(n_inputs > 0 ? n_inputs : 1), sizeof *params);
  if (!params) return at_fail(AT_ERR_NOMEM, "no memory");
  for (int i = 0; i < n_inputs && s == AT_OK; i++) {
    cache_db *check = NULL;
    if ((s = cache_open(inputs[i], CACHE_READ, &check)) == AT_OK) {
      snprintf(params[i], sizeof params[i], "%s", check->uri_params);
      cache_close(check);
    }
  }
  /* The new file lives beside the file the output names (through a symbolic link), so that the
   * rename replaces it on one file system. */
  char target[PATH_MAX], tmp[PATH_MAX + 64];
  if (s == AT_OK && out_exists && !realpath(into_path, target))
    s = at_fail(AT_ERR_IO, "cannot resolve '%s': %s", into_path, strerror(errno));
  else if (s == AT_OK && !out_exists)
    snprintf(target, sizeof target, "%s", into_path);
  int fd = -1;
  for (int attempt = 0; s == AT_OK && fd < 0 && attempt < 100; attempt++) {
    snprintf(tmp, sizeof tmp, "%s.merge-%ld-%d", target, (long)getpid(), attempt);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, out_exists ? (out_st.st_mode & 0777) : 0666);
    if (fd < 0 && errno != EEXIST)
      s = at_fail(AT_ERR_IO, "cannot create '%s' for the merge into %s: %s", tmp, into_path, strerror(errno));
  }
  if (s == AT_OK && fd < 0) s = at_fail(AT_ERR_IO, "cannot create a new file beside %s for the merge", into_path);
  if (fd >= 0) {
    if (out_exists) (void)fchmod(fd, out_st.st_mode & 07777); /* open's mode went through the umask */
    close(fd);
  }
  int made = s == AT_OK;
  cache_db *into = NULL;
  if (s == AT_OK && out_exists) {
    sqlite3 *raw = NULL;
    int rc = sqlite3_open_v2(tmp, &raw, SQLITE_OPEN_READWRITE, NULL);
    s = rc == SQLITE_OK ? copy_existing(into_path, raw, into_path)
                        : at_fail(AT_ERR_CACHE, "%s: %s", tmp, sqlite3_errstr(rc));
    sqlite3_close(raw);
  }
  if (s == AT_OK) s = cache_open(tmp, CACHE_WRITE, &into);
  for (int i = 0; i < n_inputs && s == AT_OK; i++) s = merge_one(into, inputs[i], params[i], into_path);
  if (s == AT_OK) {
    /* One self-contained file before it takes the output's name. */
    char mode[16];
    sqlite3_busy_timeout(into->db, 0);
    s = set_journal_mode(into, "DELETE", mode, sizeof mode);
    if (s == AT_OK && strcmp(mode, "delete") != 0)
      s = at_fail(AT_ERR_CACHE, "%s: the merged file stayed in journal mode '%s'", tmp, mode);
    into->writer = 0;
  }
  cache_close(into);
  if (s == AT_OK) s = sync_path(tmp, O_RDONLY);
  if (s == AT_OK && rename(tmp, target) != 0)
    s = at_fail(AT_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, target, strerror(errno));
  if (s == AT_OK) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", target);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    else snprintf(dir, sizeof dir, ".");
    (void)sync_path(dir, O_RDONLY | O_DIRECTORY); /* the rename is done; a failed sync is not a failed merge */
  } else if (made) {
    remove_with_side_files(tmp);
  }
  free(params);
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
