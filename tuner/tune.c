/*
 * tune.c — `attntune tune CONFIG --db FILE`: the offline tuning run.
 *
 * Per shape, on one GPU (one thread and one worker process per GPU):
 *
 *   SHAPE ──> inputs + naive reference + cuDNN yardstick (worker)
 *     │
 *     ├─ cuDNN baseline timed ─────────────────────────────> trial "cudnn"
 *     │
 *     ├─ candidates = pruned variants ∩ config's search, capped by the budget
 *     │    compile (the run's NVRTC threads, shared by its GPUs) ──> VARIANT: verify, first-pass time ──> trial
 *     │      states: queued → compiled → verified → timed        (ok)
 *     │                  └─ compile_failed  └─ wrong / crashed / timeout / unsupported
 *     ├─ second pass: the fastest `keep` re-timed with full repetitions; the rest → dropped
 *     │
 *     └─ best = fastest of (full-pass ok trials, cuDNN) ──> best row with its cubin; shape done
 *
 * An f32 shape has no fused kernel and no cuDNN baseline (TN_F32_NO_FUSED, TN_F32_NO_CUDNN): its
 * cuDNN trial is recorded as unsupported, the naive kernels are timed (trial "naive"), and no best
 * row is stored, so the library's lookup chain goes on to the naive kernels by itself (a "naive"
 * best row would be taken by the exact step even for plans that ask for generated kernels only,
 * and would name the naive kernels "tuned"). The shape is marked done; `attntune report` shows
 * the naive time with "no fused kernel".
 *
 * FP8 shapes time cuDNN's FP8 graph as their baseline (trial "cudnn", its time the best row's
 * cudnn_ms; verified and kept as the yardstick as for f16/bf16, harness.h). It writes FP8 output
 * where a plan for FP8 inputs writes bf16 (runtime/api.c refuses cuDNN there), so it is never the
 * best of an FP8 shape: the best is the fastest generated kernel, which the library can run. Had
 * cuDNN won, the exact step of the lookup would name an implementation plans refuse, and every
 * application would fall through to the nearest shape or the default instead of its tuned kernel.
 *
 * A trial's recorded states: ok with first-pass repetitions → ok with full repetitions, or →
 * dropped; every other status is final when first recorded (assert_second_pass checks this).
 * Every trial is committed as it finishes; a rerun skips shapes marked done and trials already
 * final (full repetitions, or a failure), so a killed run loses at most the trial in flight.
 * Results measured with another cuDNN or NVRTC than this run's are stale (cache_trial_stale,
 * cache_best_stale): a done shape holding one is tuned again, its stale trials are redone and
 * its best row replaced.
 */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tuner/cli.h"
#include "tuner/config.h"
#include "tuner/harness.h"
#include "tuner/measure.h"
#include "tuner/pool.h"
#include "tuner/reference.h"
#include "tuner/tune.h"
#include "tuner/worker.h"
#include "runtime/lookup.h"

static volatile sig_atomic_t g_stop;

static void on_interrupt(int sig)
{
  (void)sig;
  g_stop = 1;
  signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends the process at once */
}

static double wall_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- shared run state ------------------------------------------------------------------------ */

typedef struct run_stats {
  int compiled, compile_failed, verified, wrong, crashed, timeouts, timed, shapes_done, skipped;
} run_stats;

typedef struct shape_result {
  int tuned;             /* 1 when this run produced or found a best */
  char best_impl[GEN_KEY_MAX];
  double best_ms, cudnn_ms;
  double fa2_ms; /* the fastest of attntune's own kernels (NaN: none passed) */
  int device;
  int naive_only;  /* an f32 shape: no best row, only the naive kernels */
  double naive_ms; /* its naive time (NaN: not timed) */
} shape_result;

typedef struct tune_run {
  const tn_config *config;
  const tn_tune_opts *opts;
  pthread_mutex_t lock;
  int next_shape; /* rank in order[] of the next shape a device thread takes */
  int *order;     /* shape indices, largest first: the GPUs finish together, not on a big last shape */
  run_stats stats;
  shape_result *results;
  double started;
  int progress_tty;
  int n_devices;
  at_status failure; /* first fatal error of any device thread */
  char failure_message[1024];
  rt_compile_memo *memo; /* every shape's and GPU's compiles: a key compiles once per run */
  tn_pool *compilers;    /* NVRTC threads shared by the GPUs (pool.h) */
} tune_run;

typedef struct device_job {
  tune_run *run;
  int device;
  tn_worker worker;
  cache_db *db;
  cache_env env;
  gen_target target;
  char device_name[256];
  int shape_loaded; /* the worker holds the current shape's inputs */
  tn_request shape_req;
  char serving[CACHE_SERVING_CAP]; /* the current shape's serving part of its cache key ("" padded) */
  double flops; /* the current shape's work (shape_flops): what its TFLOP/s divide */
} device_job;

/* A trial that ran on the GPU, stored unless the run is stopping: an interrupt (Ctrl-C, or the
 * SIGTERM that `timeout` sends the whole process group) also kills the worker, and the trial in
 * flight then reads as crashed or timed out; it is not the candidate's fault, so it stays
 * untried and the rerun tries it. */
static int cut_by_interrupt(const cache_trial *t)
{
  return g_stop && (t->status == CACHE_CRASHED || t->status == CACHE_TIMEOUT);
}

static at_status put_gpu_trial(device_job *job, const cache_trial *t)
{
  if (cut_by_interrupt(t)) return AT_OK;
  return cache_put_trial(job->db, &job->env, t);
}

static void count(tune_run *run, int *field)
{
  pthread_mutex_lock(&run->lock);
  ++*field;
  pthread_mutex_unlock(&run->lock);
}

static void progress(tune_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void progress(tune_run *run, const char *fmt, ...)
{
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&run->lock);
  int done = run->stats.shapes_done + run->stats.skipped, total = run->config->n_shapes;
  double elapsed = wall_s() - run->started;
  if (run->progress_tty) {
    char bar[21];
    int filled = total ? done * 20 / total : 20;
    for (int i = 0; i < 20; i++) bar[i] = i < filled ? '#' : '.';
    bar[20] = '\0';
    double eta = run->stats.shapes_done ? elapsed / done * (total - done) : 0;
    fprintf(stderr, "\r\033[K[%s] %d/%d shapes, %d timed, %.0fs, ETA %s%.0fs  %.70s", bar, done,
            total, run->stats.timed, elapsed, run->stats.shapes_done ? "" : "~", eta, line);
  } else {
    fprintf(stderr, "[%6.1fs %d/%d] %s\n", elapsed, done, total, line);
  }
  fflush(stderr);
  pthread_mutex_unlock(&run->lock);
}

/* ---- the worker, restarted as needed ---------------------------------------------------------- */

static at_status ensure_worker(device_job *job)
{
  if (job->worker.pid > 0) return AT_OK;
  job->shape_loaded = 0;
  return tn_worker_start(&job->worker, job->run->opts->exe, job->device);
}

/* Generous: the floor, plus the naive path at 10 TFLOP/s per launch, plus extra_ms; at most an
 * hour, so hangs still end. */
static int watchdog_plus_ms(const device_job *job, const at_shape *s, int reps, double extra_ms)
{
  double per_launch_ms = at_shape_flops(s) / 1e13 * 1e3;
  double ms = job->run->opts->watchdog_s * 1000.0 + per_launch_ms * (reps + 20) + extra_ms;
  return ms > 3.6e6 ? 3600000 : (int)ms;
}

static int watchdog_ms(const device_job *job, const at_shape *s, int reps) { return watchdog_plus_ms(job, s, reps, 0); }

/* Loading a shape also draws its random inputs on the host, packs and uploads them: at 50 ns an
 * element (a few times what it takes), the time for Q, K and V on top of the launches' (a B=128,
 * S=16k KV cache has 4.3e9 elements). */
static int load_watchdog_ms(const device_job *job, const at_shape *s)
{
  const double elements = (double)s->batch * ((double)s->q_len * s->q_heads + 2.0 * s->kv_len * s->kv_heads) * s->head_dim;
  return watchdog_plus_ms(job, s, 10, elements * 50e-6);
}

/* SHAPE on a (re)started worker. resp describes cuDNN on the shape. */
static at_status load_shape(device_job *job, tn_response *resp)
{
  at_status rc = ensure_worker(job);
  if (rc != AT_OK) return rc;
  rc = tn_worker_call(&job->worker, &job->shape_req, NULL, resp, load_watchdog_ms(job, &job->shape_req.shape));
  if (rc == AT_OK && resp->rc != AT_OK)
    return at_fail((at_status)resp->rc, "preparing the shape on GPU %d: %s", job->device, resp->message);
  job->shape_loaded = rc == AT_OK;
  return rc;
}

/* ---- one candidate ----------------------------------------------------------------------------- */

static int fault_for(const char *key)
{
  /* "crash:SUBSTRING", "hang:SUBSTRING" or "nan:SUBSTRING" */
  const char *spec = getenv("ATTNTUNE_FAULT");
  if (!spec || !*spec) return 0;
  const char *colon = strchr(spec, ':');
  if (!colon || !strstr(key, colon + 1)) return 0;
  if (strncmp(spec, "crash:", 6) == 0) return TN_FAULT_CRASH;
  if (strncmp(spec, "hang:", 5) == 0) return TN_FAULT_HANG;
  if (strncmp(spec, "nan:", 4) == 0) return TN_FAULT_NAN;
  return 0;
}

static void trial_init(cache_trial *t, const at_shape *s, const char *serving, const char *impl)
{
  memset(t, 0, sizeof *t);
  t->shape = *s;
  snprintf(t->serving, sizeof t->serving, "%s", serving);
  snprintf(t->impl, sizeof t->impl, "%s", impl);
  t->time_ms = t->tflops = t->err_naive = t->err_cudnn = NAN;
  t->registers = t->spill_bytes = t->smem_bytes = -1;
}

/* FLOPs of shape index: of its visible pairs per sequence for a ragged or paged shape (its
 * lengths; the maxima would overstate a mix of lengths), else at_shape_flops. */
static double shape_flops(const tn_config *cfg, int index)
{
  const at_shape *s = &cfg->shapes[index];
  const tn_serving_shape *v = cfg->serving ? &cfg->serving[index] : NULL;
  if (!v || at_serving_is_padded(&v->layout)) return at_shape_flops(s);
  return tn_sequences_work(s, v->layout.q_layout == AT_SEQ_RAGGED ? v->q_lens : NULL,
                           v->layout.kv_layout != AT_SEQ_PADDED ? v->kv_lens : NULL, 0);
}

static void trial_from_response(cache_trial *t, const tn_response *r, double flops)
{
  t->status = (cache_status)r->status;
  t->time_ms = r->status == CACHE_OK ? r->time_ms : NAN;
  t->tflops = isfinite(t->time_ms) ? flops / (t->time_ms * 1e-3) / 1e12 : NAN;
  t->err_naive = r->err_naive;
  t->err_cudnn = r->err_cudnn;
  t->reps = r->status == CACHE_OK ? r->reps : 0;
  snprintf(t->message, sizeof t->message, "%s", r->message);
}

/* Verify and time one compiled candidate with reps repetitions; records the trial. */
static at_status run_candidate(device_job *job, const rt_compiled *c, int reps, cache_trial *t)
{
  const tn_config *cfg = job->run->config;
  const at_shape *s = &job->shape_req.shape;
  tn_response resp;
  at_status rc;
  trial_init(t, s, job->serving, c->key);
  t->registers = c->resources.registers;
  t->spill_bytes = c->resources.spill_store_bytes;
  t->smem_bytes = gen_smem_bytes(&c->variant);
  if (!job->shape_loaded && (rc = load_shape(job, &resp)) != AT_OK) return rc;
  tn_request q = job->shape_req;
  q.kind = TN_REQ_VARIANT;
  snprintf(q.key, sizeof q.key, "%s", c->key);
  q.cubin_size = c->binary.cubin_size;
  q.timing = (rt_timing_opts){.warmup = cfg->warmup, .reps = reps};
  q.fault = fault_for(c->key);
  rc = tn_worker_call(&job->worker, &q, c->binary.cubin, &resp, watchdog_ms(job, s, reps));
  if (rc != AT_OK) job->shape_loaded = 0; /* the worker is gone; the next call restarts it */
  if (resp.status == CACHE_CRASHED && job->worker.pid > 0) {
    /* It answered CRASHED and exits on its own; reap it so the next call starts afresh. */
    tn_worker_stop(&job->worker);
    job->shape_loaded = 0;
  }
  trial_from_response(t, &resp, job->flops);
  run_stats *st = &job->run->stats;
  if (t->status == CACHE_OK) count(job->run, &st->timed), count(job->run, &st->verified);
  else if (t->status == CACHE_WRONG) count(job->run, &st->wrong);
  else if (cut_by_interrupt(t)) {
    /* neither counted nor stored: the rerun tries it */
  } else if (t->status == CACHE_CRASHED) count(job->run, &st->crashed);
  else if (t->status == CACHE_TIMEOUT) count(job->run, &st->timeouts);
  return put_gpu_trial(job, t);
}

/* ---- compile pipeline: NVRTC in the run's shared threads while the GPU works ---------------- */

typedef struct pipeline {
  const gen_variant *variants;
  const gen_target *target;
  rt_compile_memo *memo;
  rt_compiled *out;
  char *wanted; /* compiled by the pool; the rest only on demand (pipeline_need) */
  int n;
  tn_batch *batch;
} pipeline;

static void compile_candidate(void *ctx, int i)
{
  pipeline *p = ctx;
  rt_compile_memoized(p->memo, &p->variants[i], p->target, &p->out[i]);
}

static at_status pipeline_start(pipeline *p, const gen_variant *vs, int n, const gen_target *target,
                                const char *wanted, tn_pool *pool, rt_compile_memo *memo)
{
  memset(p, 0, sizeof *p);
  p->variants = vs, p->n = n, p->target = target, p->memo = memo;
  p->out = calloc((size_t)n + 1, sizeof *p->out);
  p->wanted = calloc((size_t)n + 1, 1);
  if (!p->out || !p->wanted) {
    free(p->out), free(p->wanted);
    return at_fail(AT_ERR_NOMEM, "no memory for %d candidates", n);
  }
  memcpy(p->wanted, wanted, (size_t)n);
  at_status rc = tn_pool_submit(pool, n, wanted, compile_candidate, p, &p->batch);
  if (rc != AT_OK) free(p->out), free(p->wanted);
  return rc;
}

static rt_compiled *pipeline_wait(pipeline *p, int i)
{
  tn_batch_wait(p->batch, i);
  return &p->out[i];
}

/* Compile i now if the pipeline skipped it (a candidate resumed from an earlier run). */
static rt_compiled *pipeline_need(pipeline *p, int i)
{
  rt_compiled *c = pipeline_wait(p, i);
  if (!p->wanted[i]) {
    rt_compile_memoized(p->memo, &p->variants[i], p->target, c);
    p->wanted[i] = 1; /* the pool never runs it: its copy of wanted says no */
  }
  return c;
}

static void pipeline_finish(pipeline *p)
{
  tn_batch_finish(p->batch); /* no new compiles; the running ones end first */
  for (int i = 0; i < p->n; i++)
    if (p->wanted[i]) rt_compiled_free(&p->out[i], 1);
  free(p->out), free(p->wanted);
}

/* ---- one shape ------------------------------------------------------------------------------ */

static int allowed(const tn_values *vals, int x)
{
  if (vals->n == 0) return 1;
  for (int i = 0; i < vals->n; i++)
    if (vals->v[i] == x) return 1;
  return 0;
}

/* Every parameter of v is among its family's allowed values (splits: only decode has a count;
 * fa2 and fa3 never restrict it, so their 0 passes). */
static int search_allows(const tn_family_search *fs, const gen_variant *v)
{
  return allowed(&fs->block_m, v->block_m) && allowed(&fs->block_n, v->block_n) &&
         allowed(&fs->warps, v->warps) && allowed(&fs->stages, v->stages) && allowed(&fs->splits, v->splits) &&
         allowed(&fs->ws, v->ws) && allowed(&fs->persistent, v->persistent) && allowed(&fs->vt, v->vt) &&
         allowed(&fs->tail, v->tail_wave != 0) && allowed(&fs->qr, v->q_regs);
}

at_status tn_tune_candidates(const tn_config *cfg, const at_shape *s, const tn_serving_shape *v,
                             const gen_target *target, gen_variant *out, int *n_out)
{
  gen_variant all[GEN_MAX_VARIANTS];
  int n = 0, kept = 0;
  *n_out = 0;
  const at_serving_layout *l = v ? &v->layout : NULL;
  at_status rc = !l || at_serving_is_padded(l)
                     ? gen_enumerate(s, target, all, GEN_MAX_VARIANTS, &n)
                     : gen_enumerate_serving(s, l->kv_layout == AT_SEQ_PAGED ? l->page_size : 0, rt_serving_ragged(l),
                                             target, all, GEN_MAX_VARIANTS, &n);
  if (rc != AT_OK) return rc;
  int cap = cfg->budget_candidates;
  /* The budget takes the first allowed candidates in the generator's order (decode first for
   * short queries, then fa3, then fa2), so a config narrows the families it cares less about. */
  for (int i = 0; i < n && (cap <= 0 || kept < cap); i++)
    if (search_allows(&cfg->search.family[all[i].family], &all[i])) out[kept++] = all[i];
  *n_out = kept;
  return AT_OK;
}

static at_status candidates_for(device_job *job, int index, gen_variant *out, int *n_out)
{
  const tn_config *cfg = job->run->config;
  return tn_tune_candidates(cfg, &cfg->shapes[index], cfg->serving ? &cfg->serving[index] : NULL, &job->target, out,
                            n_out);
}

typedef struct ranked {
  int index;
  double ms;
} ranked;

static int by_time(const void *a, const void *b)
{
  double x = ((const ranked *)a)->ms, y = ((const ranked *)b)->ms;
  return (x > y) - (x < y);
}

/* Only a first-pass ok trial goes on to the second pass (re-timed, or dropped). */
static void assert_second_pass(const cache_trial *t, int full_reps)
{
  assert(t->status == CACHE_OK && t->reps < full_reps);
  (void)t, (void)full_reps;
}

/* A trial an earlier run recorded for s, as cache_find_trial finds it; but one measured with
 * another cuDNN (a cuDNN trial) or NVRTC (any other) than this run's is not found, so that it is
 * done again (cache_trial_stale). */
static at_status find_current_trial(device_job *job, const at_shape *s, const char *impl, int *found, cache_trial *t)
{
  cache_env measured;
  at_status rc = cache_find_trial(job->db, &job->env, s, job->serving, impl, found, t, &measured);
  if (rc == AT_OK && *found && cache_trial_stale(&measured, &job->env, impl, NULL, 0)) *found = 0;
  return rc;
}

/* The cuDNN trial of this shape: reuse a final one, else time it now. */
static at_status tune_cudnn(device_job *job, const tn_response *shape_resp, cache_trial *t)
{
  const at_shape *s = &job->shape_req.shape;
  const tn_config *cfg = job->run->config;
  int found = 0;
  at_status rc = find_current_trial(job, s, "cudnn", &found, t);
  if (rc != AT_OK) return rc;
  if (found && (t->status != CACHE_OK || t->reps >= cfg->reps)) return AT_OK;
  trial_init(t, s, job->serving, "cudnn");
  if (shape_resp->status != CACHE_OK) {
    trial_from_response(t, shape_resp, job->flops);
  } else {
    tn_request q = job->shape_req;
    tn_response r;
    q.kind = TN_REQ_CUDNN;
    q.timing = (rt_timing_opts){.warmup = cfg->warmup, .reps = cfg->reps};
    rc = tn_worker_call(&job->worker, &q, NULL, &r, watchdog_ms(job, s, cfg->reps));
    if (rc != AT_OK) job->shape_loaded = 0;
    trial_from_response(t, &r, job->flops);
    t->err_naive = shape_resp->err_naive;
    if (t->status == CACHE_OK && !t->message[0]) snprintf(t->message, sizeof t->message, "%s", shape_resp->message);
  }
  return put_gpu_trial(job, t);
}

/* The naive path's trial of this shape (into *t): reuse a final one, else time it now. */
static at_status tune_naive(device_job *job, cache_trial *t)
{
  const at_shape *s = &job->shape_req.shape;
  const tn_config *cfg = job->run->config;
  tn_response r;
  int found = 0;
  at_status rc = find_current_trial(job, s, "naive", &found, t);
  if (rc != AT_OK || (found && (t->status != CACHE_OK || t->reps >= cfg->reps))) return rc;
  if (!job->shape_loaded && (rc = load_shape(job, &r)) != AT_OK) return rc;
  tn_request q = job->shape_req;
  q.kind = TN_REQ_NAIVE;
  q.timing = (rt_timing_opts){.warmup = cfg->warmup, .reps = cfg->reps};
  rc = tn_worker_call(&job->worker, &q, NULL, &r, watchdog_ms(job, s, cfg->reps + cfg->warmup));
  if (rc != AT_OK) job->shape_loaded = 0;
  trial_init(t, s, job->serving, "naive");
  trial_from_response(t, &r, job->flops);
  return put_gpu_trial(job, t);
}

static void record_result(device_job *job, int index, const cache_best *best, double cudnn_ms,
                          double fa2_ms)
{
  shape_result *r = &job->run->results[index];
  r->tuned = 1;
  r->fa2_ms = fa2_ms;
  r->device = job->device;
  r->best_ms = best->time_ms;
  r->cudnn_ms = cudnn_ms;
  snprintf(r->best_impl, sizeof r->best_impl, "%s", best->impl);
}

static void record_naive_only(device_job *job, int index, const cache_trial *naive)
{
  shape_result *r = &job->run->results[index];
  r->naive_only = 1;
  r->naive_ms = naive->status == CACHE_OK ? naive->time_ms : NAN;
  r->device = job->device;
}

/* ---- tune_shape, step by step --------------------------------------------------------------- */

/* What the steps of one shape share: the shape, its baselines, its candidates and their trials. */
typedef struct shape_tuning {
  device_job *job;
  int index; /* into the config's shapes and the run's results */
  const at_shape *s;
  char key[160];
  int f32;
  double t0;              /* when the candidates' first pass started: budget_seconds counts from here */
  tn_response shape_resp; /* the worker's answer to SHAPE: describes cuDNN on the shape */
  cache_trial naive, cudnn;
  double cudnn_ms; /* NaN: cuDNN did not time this shape */
  gen_variant vs[GEN_MAX_VARIANTS];
  int n;
  cache_trial *trials; /* one per candidate */
  char *known;         /* trials[i] is settled: by an earlier run, or by this run's first pass */
  char *wanted;        /* the pipeline compiles these ahead: the candidates no earlier run settled */
  pipeline pipe;
} shape_tuning;

/* A shape an earlier run marked done (forgotten first with --force) is skipped; its stored
 * result still goes into the summary. A done shape with a result measured under another cuDNN or
 * NVRTC than this run's (cache_shape_stale) is tuned again: its stale trials are redone, the
 * others reused, and the new best replaces the stale row. *skipped says whether it was. */
static at_status skip_if_done_earlier(shape_tuning *st, int *skipped)
{
  device_job *job = st->job;
  int done = 0, stale = 0;
  char why[512];
  at_status rc;
  *skipped = 0;
  if (job->run->opts->force && (rc = cache_forget_shape(job->db, &job->env, st->s, job->serving)) != AT_OK) return rc;
  if ((rc = cache_is_done(job->db, &job->env, st->s, job->serving, &done)) != AT_OK) return rc;
  if (!done) return AT_OK;
  if ((rc = cache_shape_stale(job->db, &job->env, st->s, job->serving, &stale, why, sizeof why)) != AT_OK) return rc;
  if (stale) {
    progress(job->run, "gpu%d %s: done earlier, but stale (%s): retuning", job->device, st->key, why);
    return AT_OK;
  }
  cache_best b;
  int found = 0;
  if (cache_get_best(job->db, job->env.gpu_model, st->s, job->serving, &b, &found) == AT_OK && found) {
    record_result(job, st->index, &b, b.cudnn_ms, gen_is_variant_key(b.impl) ? b.time_ms : NAN);
    cache_best_clear(&b);
  } else if (st->f32 && cache_find_trial(job->db, &job->env, st->s, job->serving, "naive", &found, &st->naive, NULL) == AT_OK &&
             found) {
    record_naive_only(job, st->index, &st->naive);
  }
  count(job->run, &job->run->stats.skipped);
  progress(job->run, "gpu%d %s: done earlier, skipped", job->device, st->key);
  *skipped = 1;
  return AT_OK;
}

/* SHAPE on the worker: the inputs, the naive reference and cuDNN's yardstick. Returns 0 when the
 * shape cannot be prepared (out of memory, a fault in cuDNN...): that is said and the run goes on;
 * the shape is not marked done, so a rerun tries again. */
static int prepare_inputs_and_references(shape_tuning *st)
{
  device_job *job = st->job;
  memset(&job->shape_req, 0, sizeof job->shape_req);
  job->shape_req.kind = TN_REQ_SHAPE;
  job->shape_req.shape = *st->s;
  job->shape_req.seed = tn_fresh_seed();
  job->shape_req.tolerance = job->run->config->tolerance[st->s->dtype];
  const tn_serving_shape *v = job->run->config->serving ? &job->run->config->serving[st->index] : NULL;
  if (v && !at_serving_is_padded(&v->layout)) {
    job->shape_req.layout = v->layout;
    memcpy(job->shape_req.q_lens, v->q_lens, (size_t)st->s->batch * sizeof *v->q_lens);
    memcpy(job->shape_req.kv_lens, v->kv_lens, (size_t)st->s->batch * sizeof *v->kv_lens);
  }
  job->shape_loaded = 0;
  if (load_shape(job, &st->shape_resp) != AT_OK) {
    progress(job->run, "gpu%d %s: not tuned: %s", job->device, st->key, at_last_error());
    tn_worker_stop(&job->worker);
    return 0;
  }
  return 1;
}

/* The baselines: the cuDNN trial (unsupported for f32), and the naive trial when asked for or
 * when it is all an f32 shape has. */
static at_status time_baselines(shape_tuning *st)
{
  device_job *job = st->job;
  at_status rc;
  if (st->f32)
    progress(job->run, "gpu%d %s: f32: no fused variants (no fused f32 kernel), cuDNN unsupported (no fp32 "
             "attention); timing the naive kernels only", job->device, st->key);
  if ((rc = tune_cudnn(job, &st->shape_resp, &st->cudnn)) != AT_OK) return rc;
  st->cudnn_ms = st->cudnn.status == CACHE_OK ? st->cudnn.time_ms : NAN;
  if ((job->run->opts->with_naive || st->f32) && (rc = tune_naive(job, &st->naive)) != AT_OK) return rc;
  return AT_OK;
}

/* The candidates (none for f32), and which of them earlier runs already settled. The arrays are
 * the caller's to free, also when this fails. An enumeration error is said here and still
 * returned, so it ends the shape. */
static at_status choose_candidates(shape_tuning *st)
{
  device_job *job = st->job;
  at_status rc = AT_OK;
  st->n = 0;
  if (st->f32) {
    st->n = 0; /* said in time_baselines */
  } else if ((rc = candidates_for(job, st->index, st->vs, &st->n)) != AT_OK) {
    progress(job->run, "gpu%d %s: no fused variants (%s)", job->device, st->key, at_last_error());
    st->n = 0;
  }
  /* What earlier runs already settled. */
  st->trials = calloc((size_t)st->n + 1, sizeof *st->trials);
  st->known = calloc((size_t)st->n + 1, 1), st->wanted = calloc((size_t)st->n + 1, 1);
  if (!st->trials || !st->known || !st->wanted)
    return at_fail(AT_ERR_NOMEM, "no memory for %d candidates", st->n);
  for (int i = 0; i < st->n && rc == AT_OK; i++) {
    char vkey[GEN_KEY_MAX];
    int found = 0;
    gen_variant_key(&st->vs[i], vkey, sizeof vkey);
    rc = find_current_trial(job, st->s, vkey, &found, &st->trials[i]);
    st->known[i] = (char)found;
    st->wanted[i] = (char)!found;
  }
  return rc;
}

/* A candidate NVRTC refused: its trial is final as compile_failed, with the compiler's message. */
static at_status record_compile_failure(shape_tuning *st, const rt_compiled *c, cache_trial *t)
{
  device_job *job = st->job;
  trial_init(t, st->s, job->serving, c->key);
  t->status = CACHE_COMPILE_FAILED;
  snprintf(t->message, sizeof t->message, "%s", c->message);
  count(job->run, &job->run->stats.compile_failed);
  return cache_put_trial(job->db, &job->env, t);
}

/* First pass: every candidate not settled, in the generator's order, with the first-pass
 * repetitions, until the shape's time budget is spent. */
static at_status first_pass(shape_tuning *st)
{
  device_job *job = st->job;
  const tn_config *cfg = job->run->config;
  at_status rc = AT_OK;
  int first_reps = cfg->first_pass_reps > 0 ? cfg->first_pass_reps : cfg->reps;
  /* The budget is the search's: preparing a large shape's inputs and references (8 s for 2 GB of
   * K/V) must not spend it before the first candidate. */
  st->t0 = wall_s();
  for (int i = 0; i < st->n && rc == AT_OK && !g_stop; i++) {
    if (st->known[i]) continue;
    if (cfg->budget_seconds > 0 && wall_s() - st->t0 > cfg->budget_seconds) break;
    rt_compiled *c = pipeline_wait(&st->pipe, i);
    if (c->status != AT_OK) {
      rc = record_compile_failure(st, c, &st->trials[i]);
    } else {
      count(job->run, &job->run->stats.compiled);
      rc = run_candidate(job, c, first_reps, &st->trials[i]);
    }
    st->known[i] = 1;
    if (cut_by_interrupt(&st->trials[i])) {
      progress(job->run, "gpu%d %s: %s interrupted (not stored)", job->device, st->key, st->trials[i].impl);
      break;
    }
    progress(job->run, "gpu%d %s: %s %s %.4f ms", job->device, st->key, st->trials[i].impl,
             cache_status_name(st->trials[i].status), st->trials[i].time_ms);
  }
  return rc;
}

/* Second pass: the fastest `keep` of the ok trials again with full repetitions; the others are
 * dropped. Trials already at full repetitions (an earlier run's) stay as they are. */
static at_status second_pass(shape_tuning *st)
{
  device_job *job = st->job;
  const tn_config *cfg = job->run->config;
  at_status rc = AT_OK;
  ranked *order = calloc((size_t)st->n + 1, sizeof *order);
  int n_ok = 0;
  for (int i = 0; order && i < st->n; i++)
    if (st->known[i] && st->trials[i].status == CACHE_OK) order[n_ok++] = (ranked){i, st->trials[i].time_ms};
  if (order) qsort(order, (size_t)n_ok, sizeof *order, by_time);
  int keep = cfg->keep_count > 0 ? cfg->keep_count : (int)ceil(cfg->keep_fraction * n_ok);
  if (keep < 1) keep = 1;
  for (int r = 0; r < n_ok && rc == AT_OK && !g_stop; r++) {
    cache_trial *t = &st->trials[order[r].index];
    if (t->reps >= cfg->reps) continue;
    assert_second_pass(t, cfg->reps);
    if (r >= keep) {
      t->status = CACHE_DROPPED;
      rc = cache_put_trial(job->db, &job->env, t);
      continue;
    }
    rt_compiled *c = pipeline_need(&st->pipe, order[r].index);
    if (c->status == AT_OK) rc = run_candidate(job, c, cfg->reps, t);
  }
  free(order);
  return rc;
}

int tn_tune_cudnn_may_be_best(const at_shape *s)
{
  return !at_dtype_is_fp8(s->dtype); /* see the header comment */
}

/* Best of the full-pass results, cuDNN included where it may be best: *winner is the candidate's
 * index, -2 for cuDNN, -1 for none; *fa2_ms the fastest of attntune's own kernels (NaN: none
 * passed). */
static void pick_best(const shape_tuning *st, cache_best *best, int *winner, double *fa2_ms)
{
  const tn_config *cfg = st->job->run->config;
  memset(best, 0, sizeof *best);
  best->time_ms = INFINITY;
  best->err_naive = best->err_cudnn = NAN;
  *winner = -1;
  for (int i = 0; i < st->n; i++)
    if (st->known[i] && st->trials[i].status == CACHE_OK && st->trials[i].reps >= cfg->reps &&
        st->trials[i].time_ms < best->time_ms)
      best->time_ms = st->trials[i].time_ms, *winner = i;
  *fa2_ms = *winner >= 0 ? best->time_ms : NAN;
  if (tn_tune_cudnn_may_be_best(st->s) && isfinite(st->cudnn_ms) && st->cudnn_ms < best->time_ms)
    best->time_ms = st->cudnn_ms, *winner = -2;
}

/* The best row, with the winning candidate's cubin (none for cuDNN), and the shape marked done. */
static at_status store_best_row(shape_tuning *st, cache_best *best, int winner, double fa2_ms)
{
  device_job *job = st->job;
  const at_shape *s = st->s;
  best->shape = *s;
  snprintf(best->serving, sizeof best->serving, "%s", job->serving);
  best->env = job->env;
  best->cudnn_ms = st->cudnn_ms;
  best->tflops = job->flops / (best->time_ms * 1e-3) / 1e12;
  snprintf(best->arch, sizeof best->arch, "%s", job->target.arch);
  if (winner == -2) {
    snprintf(best->impl, sizeof best->impl, "cudnn");
    best->err_naive = st->cudnn.err_naive;
  } else {
    rt_compiled *c = pipeline_need(&st->pipe, winner);
    snprintf(best->impl, sizeof best->impl, "%s", st->trials[winner].impl);
    best->err_naive = st->trials[winner].err_naive;
    best->err_cudnn = st->trials[winner].err_cudnn;
    gen_entry_name(&st->vs[winner], best->entry, sizeof best->entry);
    best->cubin = c->binary.cubin;
    best->cubin_size = c->binary.cubin_size;
  }
  int stored = 0;
  at_status rc = cache_put_best(job->db, best, &stored);
  if (rc == AT_OK) rc = cache_mark_done(job->db, &job->env, s, job->serving);
  if (rc == AT_OK) {
    record_result(job, st->index, best, st->cudnn_ms, fa2_ms);
    count(job->run, &job->run->stats.shapes_done);
    progress(job->run, "gpu%d %s: best %s %.4f ms (%.1f TFLOP/s), cuDNN %.4f ms", job->device, st->key,
             best->impl, best->time_ms, best->tflops, st->cudnn_ms);
  }
  return rc;
}

/* An f32 shape: marked done with no best row (see the comment at the top); its naive time goes
 * into the summary. */
static at_status store_naive_only(shape_tuning *st)
{
  device_job *job = st->job;
  const cache_trial *naive = &st->naive;
  at_status rc = cache_mark_done(job->db, &job->env, st->s, job->serving);
  if (rc == AT_OK) {
    record_naive_only(job, st->index, naive);
    count(job->run, &job->run->stats.shapes_done);
    if (naive->status == CACHE_OK)
      progress(job->run, "gpu%d %s: naive %.4f ms (%.1f TFLOP/s); no fused kernel, cuDNN unsupported: no best "
               "row", job->device, st->key, naive->time_ms, naive->tflops);
    else
      progress(job->run, "gpu%d %s: naive %s (%s); no fused kernel, cuDNN unsupported: no best row",
               job->device, st->key, cache_status_name(naive->status), naive->message);
  }
  return rc;
}

/* The shape's outcome, stored unless it ended early (rc an error, or interrupted): the best row,
 * an f32 shape's naive-only mark, or done with nothing that passed. */
static at_status store_best(shape_tuning *st, at_status rc)
{
  device_job *job = st->job;
  cache_best best;
  int winner;
  double fa2_ms;
  pick_best(st, &best, &winner, &fa2_ms);
  if (rc == AT_OK && !g_stop && winner != -1) {
    rc = store_best_row(st, &best, winner, fa2_ms);
  } else if (rc == AT_OK && !g_stop && st->f32) {
    rc = store_naive_only(st);
  } else if (rc == AT_OK && !g_stop) {
    progress(job->run, "gpu%d %s: nothing passed verification%s", job->device, st->key,
             !tn_tune_cudnn_may_be_best(st->s) && isfinite(st->cudnn_ms)
                 ? " (cuDNN's FP8 graph, timed as the baseline, writes FP8 output: not a plan)"
                 : "");
    /* A best row from an earlier run (now stale: this run retuned the shape) would still be
     * served, and found stale by every later run. */
    rc = cache_forget_best(job->db, &job->env, st->s, job->serving);
    if (rc == AT_OK) rc = cache_mark_done(job->db, &job->env, st->s, job->serving);
    count(job->run, &job->run->stats.shapes_done);
  }
  return rc;
}

/* Shape index's key as progress lines and the summary say it (its at_serving_key for a ragged or
 * paged shape), and where part is not NULL the serving part of it that its cache rows carry. */
static void config_shape_key(const tn_config *cfg, int index, char *key, size_t size, char *part, size_t part_size)
{
  const tn_serving_shape *v = cfg->serving ? &cfg->serving[index] : NULL;
  const at_serving_layout *l = v ? &v->layout : NULL;
  const int *q_lens = v && v->layout.q_layout == AT_SEQ_RAGGED ? v->q_lens : NULL, *kv_lens = v ? v->kv_lens : NULL;
  at_serving_key(&cfg->shapes[index], l, q_lens, kv_lens, key, size);
  if (part) at_serving_part(&cfg->shapes[index], l, q_lens, kv_lens, part, part_size);
}

static void shape_identity(device_job *job, int index, char *key, size_t size)
{
  config_shape_key(job->run->config, index, key, size, job->serving, sizeof job->serving);
  job->flops = shape_flops(job->run->config, index);
}

/* One shape, the steps of the header comment in order. An error return ends the device's run;
 * a shape that cannot be prepared is skipped (AT_OK). */
static at_status tune_shape(device_job *job, int index)
{
  shape_tuning st;
  memset(&st, 0, sizeof st);
  st.job = job;
  st.index = index;
  st.s = &job->run->config->shapes[index];
  st.f32 = st.s->dtype == AT_DTYPE_F32;
  st.cudnn_ms = NAN;
  shape_identity(job, index, st.key, sizeof st.key);
  trial_init(&st.naive, st.s, job->serving, "naive");
  int skipped = 0;
  at_status rc = skip_if_done_earlier(&st, &skipped);
  if (rc != AT_OK || skipped) return rc;
  if (!prepare_inputs_and_references(&st)) return AT_OK;
  if ((rc = time_baselines(&st)) != AT_OK) return rc;
  rc = choose_candidates(&st);
  if (rc == AT_OK) rc = pipeline_start(&st.pipe, st.vs, st.n, &job->target, st.wanted, job->run->compilers,
                                        job->run->memo);
  if (rc != AT_OK) {
    free(st.trials), free(st.known), free(st.wanted);
    return rc;
  }
  rc = first_pass(&st);
  if (rc == AT_OK) rc = second_pass(&st); /* after an error it would only rank, which changes nothing */
  rc = store_best(&st, rc);
  pipeline_finish(&st.pipe); /* after store_best: the best row's cubin is the pipeline's */
  free(st.trials), free(st.known), free(st.wanted);
  return rc;
}

/* ---- device threads -------------------------------------------------------------------------- */

/* The run's first fatal error (rc with the calling thread's message); the device threads take no
 * new shape once it is set. */
static void record_failure(tune_run *run, at_status rc)
{
  pthread_mutex_lock(&run->lock);
  if (run->failure == AT_OK) {
    run->failure = rc;
    snprintf(run->failure_message, sizeof run->failure_message, "%s", at_last_error());
  }
  pthread_mutex_unlock(&run->lock);
}

static at_status start_device(device_job *job)
{
  tn_request q;
  tn_response r;
  at_status rc = cache_open(job->run->opts->db_path, CACHE_WRITE, &job->db);
  if (rc != AT_OK) return rc;
  if ((rc = ensure_worker(job)) != AT_OK) return rc;
  memset(&q, 0, sizeof q);
  q.kind = TN_REQ_INFO;
  if ((rc = tn_worker_call(&job->worker, &q, NULL, &r, 120000)) != AT_OK) return rc;
  if (r.rc != AT_OK) return at_fail((at_status)r.rc, "GPU %d: %s", job->device, r.message);
  job->env = r.env;
  gen_templates_version(job->env.template_version, sizeof job->env.template_version);
  snprintf(job->device_name, sizeof job->device_name, "%s", r.device_name);
  return gen_target_make(r.arch, r.smem_optin, &job->target);
}

static void *device_thread(void *arg)
{
  device_job *job = arg;
  tune_run *run = job->run;
  at_status rc = start_device(job);
  if (rc == AT_OK)
    progress(run, "gpu%d: %s, %s, driver %s, NVRTC %s, cuDNN %s, templates %s", job->device,
             job->device_name, job->target.arch, job->env.driver, job->env.nvrtc,
             job->env.cudnn[0] ? job->env.cudnn : "none", job->env.template_version);
  while (rc == AT_OK && !g_stop) {
    pthread_mutex_lock(&run->lock);
    int rank = run->failure == AT_OK ? run->next_shape++ : run->config->n_shapes;
    pthread_mutex_unlock(&run->lock);
    if (rank >= run->config->n_shapes) break;
    rc = tune_shape(job, run->order[rank]);
  }
  if (rc != AT_OK) record_failure(run, rc);
  if (job->worker.pid > 0) {
    tn_request q;
    tn_response r;
    memset(&q, 0, sizeof q);
    q.kind = TN_REQ_QUIT;
    tn_worker_call(&job->worker, &q, NULL, &r, 1); /* no answer comes; the stop reaps it */
    tn_worker_stop(&job->worker);
  }
  cache_close(job->db);
  return NULL;
}

/* ---- the run ------------------------------------------------------------------------------- */

static void print_summary(const tune_run *run)
{
  const tn_config *cfg = run->config;
  printf("\n%-46s %-42s %9s %8s %9s %9s %8s\n", "shape", "best", "best_ms", "TFLOP/s", "tuned_ms",
         "cudnn_ms", "tuned/cuDNN");
  for (int i = 0; i < cfg->n_shapes; i++) {
    const shape_result *r = &run->results[i];
    char key[192];
    config_shape_key(cfg, i, key, sizeof key, NULL, 0);
    if (r->naive_only) {
      char note[96] = "naive only (no fused kernel, cuDNN unsupported): not timed";
      if (isfinite(r->naive_ms))
        snprintf(note, sizeof note, "naive only (no fused kernel, cuDNN unsupported): %.4f ms", r->naive_ms);
      printf("%-46s %s\n", key, note);
      continue;
    }
    if (!r->tuned) {
      printf("%-48s %-44s\n", key, "(not tuned)");
      continue;
    }
    double tflops = shape_flops(cfg, i) / (r->best_ms * 1e-3) / 1e12;
    char cudnn[32] = "-", fa2[32] = "-", speedup[32] = "-";
    if (isfinite(r->cudnn_ms)) snprintf(cudnn, sizeof cudnn, "%.4f", r->cudnn_ms);
    if (isfinite(r->fa2_ms)) snprintf(fa2, sizeof fa2, "%.4f", r->fa2_ms);
    if (isfinite(r->cudnn_ms) && isfinite(r->fa2_ms)) snprintf(speedup, sizeof speedup, "%.2fx", r->cudnn_ms / r->fa2_ms);
    printf("%-46s %-42s %9.4f %8.1f %9s %9s %8s\n", key, r->best_impl, r->best_ms, tflops, fa2, cudnn, speedup);
  }
  const run_stats *st = &run->stats;
  int memo_hits = 0, nvrtc_runs = 0;
  rt_compile_memo_counts(run->memo, &memo_hits, &nvrtc_runs);
  printf("\n%d shapes tuned, %d skipped (done earlier); candidates: %d compiled, %d failed to "
         "compile, %d verified and timed, %d wrong, %d crashed, %d timed out; NVRTC ran %d times (%d "
         "candidates' keys were compiled for an earlier shape); wall %.1f s\n",
         st->shapes_done, st->skipped, st->compiled, st->compile_failed, st->timed, st->wrong, st->crashed,
         st->timeouts, nvrtc_runs, memo_hits, wall_s() - run->started);
}

/* The NVRTC pool's size: --jobs, else one thread per CPU (the pool serves every GPU). */
static int compile_threads(const tn_tune_opts *opts)
{
  if (opts->jobs > 0) return opts->jobs;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 1 ? 1 : cpus > 256 ? 256 : (int)cpus;
}

int tn_tune_run(const tn_config *cfg, const tn_tune_opts *opts, const int *devices, int n_devices)
{
  tune_run run;
  memset(&run, 0, sizeof run);
  run.config = cfg;
  run.opts = opts;
  run.started = wall_s();
  run.progress_tty = isatty(2);
  run.n_devices = n_devices;
  run.results = calloc((size_t)cfg->n_shapes + 1, sizeof *run.results);
  run.order = calloc((size_t)cfg->n_shapes + 1, sizeof *run.order);
  device_job *jobs = calloc((size_t)n_devices, sizeof *jobs);
  pthread_t *threads = calloc((size_t)n_devices, sizeof *threads);
  if (!run.results || !run.order || !jobs || !threads) {
    fprintf(stderr, "attntune tune: out of memory\n");
    free(run.results), free(run.order), free(jobs), free(threads);
    return TN_EXIT_RUNTIME;
  }
  if (tn_work_order(cfg, run.order) != AT_OK || rt_compile_memo_create(&run.memo) != AT_OK ||
      tn_pool_create(compile_threads(opts), &run.compilers) != AT_OK) {
    fprintf(stderr, "attntune tune: %s\n", at_last_error());
    rt_compile_memo_destroy(run.memo);
    free(run.results), free(run.order), free(jobs), free(threads);
    return TN_EXIT_RUNTIME;
  }
  pthread_mutex_init(&run.lock, NULL);
  g_stop = 0;
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  int n_started = 0;
  for (int i = 0; i < n_devices; i++) {
    jobs[i].run = &run;
    jobs[i].device = devices[i];
    jobs[i].worker.to_fd = jobs[i].worker.from_fd = -1;
    int err = pthread_create(&threads[i], NULL, device_thread, &jobs[i]);
    if (err != 0) {
      /* The run fails; the threads already started take no new shape once the failure is set,
       * finish the shape in hand (its trials are committed) and are joined below. */
      record_failure(&run, at_fail(AT_ERR_NOMEM, "cannot start the thread for GPU %d: %s", devices[i],
                                   strerror(err)));
      break;
    }
    n_started++;
  }
  for (int i = 0; i < n_started; i++) pthread_join(threads[i], NULL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  if (run.progress_tty) fputc('\n', stderr);
  print_summary(&run);
  int code = TN_EXIT_OK;
  if (run.failure != AT_OK) {
    fprintf(stderr, "attntune tune: %s\n", run.failure_message);
    code = TN_EXIT_RUNTIME;
  } else if (g_stop) {
    fprintf(stderr, "attntune tune: interrupted; finished trials are in %s, rerun to resume\n", opts->db_path);
    code = 130;
  }
  pthread_mutex_destroy(&run.lock);
  tn_pool_destroy(run.compilers); /* every shape's batch is finished: the device threads are joined */
  rt_compile_memo_destroy(run.memo);
  free(run.results), free(run.order), free(jobs), free(threads);
  return code;
}
