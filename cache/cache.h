/*
 * cache.h — the SQLite cache of tuning results. Prefix cache_.
 *
 * One file holds every trial of every tuning run (what was tried, how it ended, how fast, how far
 * from the references) and, per (GPU model, shape), the best verified implementation with cuDNN's
 * time beside it and the winner's cubin, so applications start without compiling. Rows carry the
 * environment they were measured in (GPU model, compute capability, SM count, driver, NVRTC,
 * cuDNN, template version), so stale results are known, never silently mixed.
 *
 * Concurrency: writers use the WAL journal and a busy timeout, so several tuning processes (one
 * per GPU) can write one file; every write is its own transaction, committed before the call
 * returns, so a killed run loses at most the trial in flight. The last writer to close a file
 * checkpoints it and switches it back to rollback mode (journal_mode DELETE), so a closed cache is
 * one self-contained file with no -wal or -shm beside it: it can be copied alone and read where
 * its folder cannot be written (a container image, a read-only volume). A file still in WAL mode
 * (a killed writer, a reader open while the last writer closed, an older attntune) is read there
 * too: through its -wal and -shm when both are present, else without them when the -wal holds
 * nothing; a -wal with results but no usable -shm is refused, never silently skipped.
 *
 * Only attntune caches are opened: a file that is not SQLite, or a SQLite file without attntune's
 * tables and schema version, is refused by name before anything is written to it. An empty file
 * (0 bytes) holds nothing and becomes a cache when opened with CACHE_WRITE.
 *
 * Schema versions (PRAGMA user_version) and their migrations are in cache.c; opening a file with a
 * newer schema than this build knows is refused. A writer migrates an older file in place; a
 * reader never writes, so it refuses an older file and says how to migrate it.
 */
#ifndef AT_CACHE_CACHE_H
#define AT_CACHE_CACHE_H

#include <stddef.h>

#include "attntune.h"

#define CACHE_SCHEMA_VERSION 3

typedef struct cache_db cache_db;

/* Where a result was measured. gpu_model is the device name ("NVIDIA H200"). */
typedef struct cache_env {
  char gpu_model[128];
  int cc_major, cc_minor;
  int sm_count;
  char driver[32];           /* "580.159.04" */
  char nvrtc[16];            /* "13.0" */
  char cudnn[16];            /* "9.19.0" or "" */
  char template_version[96]; /* of the kernel templates, every family's part joined by '.' (gen_templates_version) */
} cache_env;

/* Results depend on the libraries they were measured with, beside the kernel templates (which
 * are part of a row's identity; generator/ judges them). A cuDNN trial is stale under another
 * cuDNN version; any other trial (a generated kernel or the naive kernels, both compiled by
 * NVRTC) under another NVRTC version. A best row is the outcome of a comparison between
 * generated kernels and cuDNN, so it goes stale when either version changed, whichever won: a
 * new cuDNN may now beat the kernel that beat the old one, and kernels from a new NVRTC may now
 * beat cuDNN. A side that `now` does not know ("": cuDNN or NVRTC not loadable in this process)
 * cannot judge and makes nothing stale; the driver version is recorded but makes nothing stale.
 * Each returns 1 when stale, with why in words naming both versions (why may be NULL), else 0. */
int cache_trial_stale(const cache_env *measured, const cache_env *now, const char *impl, char *why,
                      size_t why_size);
int cache_best_stale(const cache_env *measured, const cache_env *now, const char *impl, char *why,
                     size_t why_size);

/* Ragged and paged (serving) shapes: a row's identity is its shape and, for ragged or paged
 * tensors, the part of its at_serving_key past at_shape_key (".qragged.kvragged.lq512.lkv512",
 * ".kvpaged16.lkv2048"), stored joined in the shape_key column. The cache treats that part as
 * opaque text, as it does variant keys; every function below that takes a shape takes it beside
 * (serving: NULL or "" for padded tensors, whose rows are what they always were). */

/* How a trial ended. The order is the tuning job's state machine's final states. */
typedef enum cache_status {
  CACHE_OK = 0,          /* verified and timed */
  CACHE_INVALID,         /* refused by the constraints (never compiled) */
  CACHE_COMPILE_FAILED,  /* NVRTC error */
  CACHE_CRASHED,         /* the kernel faulted (illegal address, trap); the worker restarted */
  CACHE_TIMEOUT,         /* the watchdog fired */
  CACHE_WRONG,           /* output over the tolerance, or NaN */
  CACHE_UNSUPPORTED,     /* the implementation declines the shape (cuDNN says so) */
  CACHE_DROPPED,         /* verified, but dropped after the cheap first timing pass */
} cache_status;

const char *cache_status_name(cache_status status); /* "ok", "compile_failed", ... */
at_status cache_status_parse(const char *text, cache_status *out);

/* Bytes of a row's serving part, NUL included (cache_trial.serving, cache_best.serving). */
enum { CACHE_SERVING_CAP = 64 };

/* Bytes of a row's whole key (the shape_key column), NUL included. */
enum { CACHE_ROW_KEY_CAP = 160 };

/* The shape_key column of a row: at_shape_key, then the serving part when there is one (a ragged
 * or paged shape's layout and length buckets), so its rows are told apart from the padded shape's. */
void cache_row_key(const at_shape *shape, const char *serving, char key[CACHE_ROW_KEY_CAP]);

typedef struct cache_trial {
  at_shape shape;
  char serving[CACHE_SERVING_CAP]; /* "" for padded tensors, else the layout part of its key (below) */
  char impl[96]; /* a variant key, "cudnn" or "naive" */
  cache_status status;
  double time_ms, tflops;  /* NaN when not timed */
  double err_naive;        /* relative L2 vs the naive reference; NaN when not checked */
  double err_cudnn;        /* vs cuDNN's output on the same inputs; NaN when cuDNN did not run */
  int registers, spill_bytes, smem_bytes; /* -1 when unknown */
  int reps;                /* timed repetitions behind time_ms (a first pass has few) */
  char message[512];
} cache_trial;

typedef struct cache_best {
  at_shape shape;
  char serving[CACHE_SERVING_CAP]; /* as cache_trial.serving */
  cache_env env;
  char impl[96];
  double time_ms, tflops;
  double cudnn_ms; /* NaN when cuDNN could not run the shape */
  double err_naive, err_cudnn;
  char arch[16];   /* the cubin's target */
  char entry[128]; /* kernel name in the cubin ("" for cudnn) */
  void *cubin;     /* owned by the struct when read back: free with cache_best_clear */
  size_t cubin_size;
  char updated_at[32];
} cache_best;

/* How cache_open opens a file. The values 0 and 1 are the old read_only flag's. */
typedef enum cache_mode {
  CACHE_WRITE = 0,          /* read-write, creating a missing file and migrating an older one
                             * (tune, a writable library context) */
  CACHE_READ = 1,           /* read-only; a missing file, or one that needs migration, is refused */
  CACHE_WRITE_EXISTING = 2, /* read-write, migrating, but a missing or empty file is refused (prune) */
} cache_mode;

/* Open path as a cache. Refused, with a message naming the file: a missing file (AT_ERR_IO, but
 * CACHE_WRITE creates it), a file that is not an attntune cache, a newer schema (AT_ERR_CACHE). */
at_status cache_open(const char *path, cache_mode mode, cache_db **out);
void cache_close(cache_db *db);
int cache_schema_version(cache_db *db);
/* The schema version the file had when cache_open opened it for writing, before it migrated
 * (0: it was new or empty); `attntune cache migrate` reports it. */
int cache_opened_version(const cache_db *db);

/* Record one trial (committed on return). */
at_status cache_put_trial(cache_db *db, const cache_env *env, const cache_trial *trial);
/* Was impl already tried for shape in this environment's GPU model and template version? out
 * and measured (the environment it was measured in), when not NULL, receive the trial. */
at_status cache_find_trial(cache_db *db, const cache_env *env, const at_shape *shape, const char *serving,
                           const char *impl, int *found, cache_trial *out, cache_env *measured);
/* Count trials of a shape (all statuses) for the environment's GPU model and template version. */
at_status cache_count_trials(cache_db *db, const cache_env *env, const at_shape *shape, const char *serving,
                             int *count);

/* Store best unless the file already holds a faster one for the same GPU model, shape and
 * template version, measured with the same cuDNN and NVRTC: a row that is stale against best's
 * environment (cache_best_stale) is replaced whatever its time (*stored says which happened).
 * Committed on return. */
at_status cache_put_best(cache_db *db, const cache_best *best, int *stored);
/* The best for (gpu_model, shape), any template version but the newest first. */
at_status cache_get_best(cache_db *db, const char *gpu_model, const at_shape *shape, const char *serving,
                         cache_best *out, int *found);
void cache_best_clear(cache_best *best);

/* A shape is done when its tuning finished (all candidates tried or the budget spent). */
at_status cache_mark_done(cache_db *db, const cache_env *env, const at_shape *shape, const char *serving);
at_status cache_is_done(cache_db *db, const cache_env *env, const at_shape *shape, const char *serving, int *done);
/* Forget a shape's trials, best and done mark for this environment (tune --force). */
at_status cache_forget_shape(cache_db *db, const cache_env *env, const at_shape *shape, const char *serving);
/* Forget only its best row (a retune of a stale shape in which nothing passed). */
at_status cache_forget_best(cache_db *db, const cache_env *env, const at_shape *shape, const char *serving);
/* Is the outcome of tuning shape (under env's GPU model and template version) stale against
 * env's cuDNN and NVRTC? That is its best row, which carries both versions, and its baseline
 * trials (cuDNN's, and the naive kernels' that an f32 shape has instead of a best row); a
 * generated kernel's trial is judged when a retune finds it (cache_trial_stale), since one that
 * the config no longer lists would never be redone. *stale says so, why says which and how. */
at_status cache_shape_stale(cache_db *db, const cache_env *env, const at_shape *shape, const char *serving,
                            int *stale, char *why, size_t why_size);

/* Visit every best row (ordered by GPU model, dtype, head dim, mask, shape); stop when visit
 * returns non-zero. gpu_model NULL: all models. */
typedef int (*cache_best_visitor)(void *user, const cache_best *best);
at_status cache_each_best(cache_db *db, const char *gpu_model, cache_best_visitor visit, void *user);
typedef int (*cache_trial_visitor)(void *user, const cache_env *env, const cache_trial *trial);
at_status cache_each_trial(cache_db *db, const char *gpu_model, cache_trial_visitor visit, void *user);

/* GPU models with results, for messages ("this cache holds results for: ..."). */
at_status cache_models(cache_db *db, char *buf, size_t size, int *n_models);

/* Copy every trial of the inputs into `into` (created if needed), and per (GPU model, shape,
 * template version) keep the faster best; of two rows (best or trial) of one key measured with
 * different cuDNN or NVRTC versions, the later measurement. All or nothing: the result is written to a new file
 * beside `into` and renamed over it, so a failure leaves `into` as it was (or absent). Every
 * input must be a current cache; `into`, when it exists, an attntune cache of any known version.
 * An output that is also an input (the same file, by device and inode) is refused before anything
 * is written (AT_ERR_INVALID). Rows written to `into` by another process during the merge are
 * lost with the old file: do not merge into a cache that a tuning run is writing. */
at_status cache_merge(const char *const *inputs, int n_inputs, const char *into);

/* Delete rows whose template version is not current_template (and their trials). *removed
 * counts the rows deleted. */
at_status cache_prune(cache_db *db, const char *current_template, int *removed);

/* Compiled kernels by variant key and arch, for the template version they were built from.
 * cache_get_cubin also finds a best row's cubin; the caller frees *cubin. */
at_status cache_put_cubin(cache_db *db, const char *impl, const char *arch, const char *template_version,
                          const char *nvrtc, const char *entry, const void *cubin, size_t size);
at_status cache_get_cubin(cache_db *db, const char *impl, const char *arch, const char *template_version,
                          void **cubin, size_t *size, int *found);
int cache_is_read_only(const cache_db *db);

#endif /* AT_CACHE_CACHE_H */
