/*
 * cache.c — the process-wide plan cache of the Python package (see atpy.h).
 *
 *   contexts: one at_context per (device, db)          created on first use, never replaced
 *   plans:    one at_plan per (device, db, shape, layout, impl), each with its own run lock
 *
 * Everything is guarded by one mutex; a miss creates the plan under it (at_plan_create serializes
 * per context anyway), a hit is a linear scan of a few dozen entries at most.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atpy.h"

typedef struct ctx_entry {
  int device;
  char *db; /* "" for none */
  at_context *ctx;
} ctx_entry;

typedef struct plan_entry {
  int device;
  char *db;
  char *impl; /* "" for auto */
  at_shape shape;
  at_layout layout;
  at_serving_layout serving; /* serving plans (atpy_plan_get_serving); struct_size 0 for others */
  at_plan *plan;
  pthread_mutex_t run_lock;
} plan_entry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static ctx_entry *g_ctx;
static int g_n_ctx, g_cap_ctx;
static plan_entry **g_plans;
static int g_n_plans, g_cap_plans;
static _Thread_local char g_error[1024];

static at_status fail(at_status rc, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_error, sizeof g_error, fmt, ap);
  va_end(ap);
  return rc;
}

const char *atpy_last_error(void) { return g_error[0] ? g_error : at_last_error(); }

static int strides_equal(const at_strides *a, const at_strides *b)
{
  return a->batch == b->batch && a->seq == b->seq && a->head == b->head;
}

static int shape_equal(const at_shape *a, const at_shape *b)
{
  return a->batch == b->batch && a->q_len == b->q_len && a->kv_len == b->kv_len &&
         a->q_heads == b->q_heads && a->kv_heads == b->kv_heads && a->head_dim == b->head_dim &&
         a->dtype == b->dtype && at_shape_kv_dtype(a) == at_shape_kv_dtype(b) && a->mask == b->mask &&
         a->scale == b->scale && a->with_lse == b->with_lse;
}

static int layout_equal(const at_layout *a, const at_layout *b)
{
  return strides_equal(&a->q, &b->q) && strides_equal(&a->k, &b->k) && strides_equal(&a->v, &b->v) &&
         strides_equal(&a->o, &b->o);
}

static int serving_equal(const at_serving_layout *a, const at_serving_layout *b)
{
  return a->struct_size == b->struct_size && a->q_layout == b->q_layout && a->kv_layout == b->kv_layout &&
         a->page_size == b->page_size && a->max_pages_per_seq == b->max_pages_per_seq &&
         layout_equal(&a->strides, &b->strides);
}

static char *copy_string(const char *s)
{
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c) memcpy(c, s, n);
  return c;
}

/* The context for (device, db), opened on first use. Called with g_lock held. */
static at_status context_get(int device, const char *db, at_context **out)
{
  for (int i = 0; i < g_n_ctx; i++)
    if (g_ctx[i].device == device && strcmp(g_ctx[i].db, db) == 0) {
      *out = g_ctx[i].ctx;
      return AT_OK;
    }
  if (g_n_ctx == g_cap_ctx) {
    int cap = g_cap_ctx ? 2 * g_cap_ctx : 4;
    ctx_entry *grown = realloc(g_ctx, (size_t)cap * sizeof *grown);
    if (!grown) return fail(AT_ERR_NOMEM, "attntune: no memory for the context table");
    g_ctx = grown, g_cap_ctx = cap;
  }
  char *db_copy = copy_string(db);
  if (!db_copy) return fail(AT_ERR_NOMEM, "attntune: no memory for the context table");
  at_context *ctx = NULL;
  at_status rc = at_context_create(device, db[0] ? db : NULL, 0, &ctx);
  if (rc != AT_OK) {
    free(db_copy);
    return fail(rc, "at_context_create(device %d, cache '%s'): %s: %s", device, db, at_status_name(rc),
                at_last_error());
  }
  g_ctx[g_n_ctx++] = (ctx_entry){device, db_copy, ctx};
  *out = ctx;
  return AT_OK;
}

static plan_entry *find_plan(int device, const at_shape *shape, const at_layout *layout,
                             const at_serving_layout *serving, const char *impl, const char *db)
{
  for (int i = 0; i < g_n_plans; i++) {
    plan_entry *e = g_plans[i];
    if (e->device == device && shape_equal(&e->shape, shape) && layout_equal(&e->layout, layout) &&
        serving_equal(&e->serving, serving) && strcmp(e->impl, impl) == 0 && strcmp(e->db, db) == 0)
      return e;
  }
  return NULL;
}

static void entry_free(plan_entry *e)
{
  if (!e) return;
  at_plan_destroy(e->plan);
  pthread_mutex_destroy(&e->run_lock);
  free(e->db);
  free(e->impl);
  free(e);
}

/* Called with g_lock held. serving->struct_size 0: an ordinary plan of layout. */
static at_status plan_create(int device, const at_shape *shape, const at_layout *layout,
                             const at_serving_layout *serving, const char *impl, const char *db, plan_entry **out)
{
  at_status rc;
  at_context *ctx = NULL;
  if ((rc = context_get(device, db, &ctx)) != AT_OK) return rc;
  if (g_n_plans == g_cap_plans) {
    int cap = g_cap_plans ? 2 * g_cap_plans : 16;
    plan_entry **grown = realloc(g_plans, (size_t)cap * sizeof *grown);
    if (!grown) return fail(AT_ERR_NOMEM, "attntune: no memory for the plan table");
    g_plans = grown, g_cap_plans = cap;
  }
  plan_entry *e = calloc(1, sizeof *e);
  if (!e) return fail(AT_ERR_NOMEM, "attntune: no memory for a plan entry");
  if (pthread_mutex_init(&e->run_lock, NULL) != 0) {
    free(e);
    return fail(AT_ERR_NOMEM, "attntune: pthread_mutex_init failed");
  }
  e->device = device, e->shape = *shape, e->layout = *layout, e->serving = *serving;
  e->db = copy_string(db);
  e->impl = copy_string(impl);
  if (!e->db || !e->impl) {
    entry_free(e);
    return fail(AT_ERR_NOMEM, "attntune: no memory for a plan entry");
  }
  at_plan_options opts = {.impl = impl[0] ? impl : NULL};
  rc = serving->struct_size ? at_plan_create_serving(ctx, shape, serving, &opts, &e->plan)
                            : at_plan_create(ctx, shape, layout, &opts, &e->plan);
  if (rc != AT_OK) {
    char key[160], what[96] = "";
    at_shape_key(shape, key, sizeof key);
    if (serving->struct_size) at_serving_layout_describe(serving, what, sizeof what);
    fail(rc, "at_plan_create%s(%s%s%s, impl '%s', device %d): %s: %s", serving->struct_size ? "_serving" : "", key,
         what[0] ? ", " : "", what, impl[0] ? impl : "auto", device, at_status_name(rc), at_last_error());
    e->plan = NULL;
    entry_free(e);
    return rc;
  }
  g_plans[g_n_plans++] = e;
  *out = e;
  return AT_OK;
}

/* The cached plan for the key, created on a miss. */
static at_status plan_get(int device, const at_shape *shape, const at_layout *layout, const at_serving_layout *serving,
                          const char *impl, const char *db, at_plan **out)
{
  if (pthread_mutex_lock(&g_lock) != 0) return fail(AT_ERR_INVALID, "attntune: cannot lock the plan cache");
  plan_entry *e = find_plan(device, shape, layout, serving, impl, db);
  at_status rc = e ? AT_OK : plan_create(device, shape, layout, serving, impl, db, &e);
  pthread_mutex_unlock(&g_lock);
  if (rc == AT_OK) *out = e->plan;
  return rc;
}

at_status atpy_plan_get(int device, const at_shape *shape, const at_layout *layout, const char *impl,
                        const char *db, at_plan **out)
{
  if (!out) return fail(AT_ERR_INVALID, "atpy_plan_get: out is NULL");
  *out = NULL;
  if (!shape) return fail(AT_ERR_INVALID, "atpy_plan_get: shape is NULL");
  g_error[0] = '\0';
  at_status rc = at_shape_check(shape);
  if (rc != AT_OK) return fail(rc, "%s", at_last_error());
  at_layout bshd = at_layout_bshd(shape);
  if (!layout) layout = &bshd;
  if (!impl) impl = "";
  if (!db) db = "";
  const at_serving_layout none = {0};
  return plan_get(device, shape, layout, &none, impl, db, out);
}

at_status atpy_plan_get_serving(int device, const at_shape *shape, const at_serving_layout *layout,
                                const char *impl, const char *db, at_plan **out)
{
  if (!out) return fail(AT_ERR_INVALID, "atpy_plan_get_serving: out is NULL");
  *out = NULL;
  if (!shape || !layout) return fail(AT_ERR_INVALID, "atpy_plan_get_serving: shape or layout is NULL");
  g_error[0] = '\0';
  at_status rc = at_serving_layout_check(shape, layout);
  if (rc != AT_OK) return fail(rc, "%s", at_last_error());
  if (layout->struct_size != sizeof *layout)
    return fail(AT_ERR_INVALID, "atpy_plan_get_serving: at_serving_layout of %zu bytes, this build's has %zu",
                layout->struct_size, sizeof *layout);
  const at_layout unused = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  return plan_get(device, shape, &unused, layout, impl ? impl : "", db ? db : "", out);
}

/* The cache entry of plan, or NULL (atpy_last_error says so). */
static plan_entry *entry_of(at_plan *plan, const char *who)
{
  plan_entry *e = NULL;
  if (pthread_mutex_lock(&g_lock) != 0) {
    fail(AT_ERR_INVALID, "attntune: cannot lock the plan cache");
    return NULL;
  }
  for (int i = 0; i < g_n_plans && !e; i++)
    if (g_plans[i]->plan == plan) e = g_plans[i];
  pthread_mutex_unlock(&g_lock);
  if (!e) fail(AT_ERR_INVALID, "%s: plan %p is not in the cache", who, (void *)plan);
  return e;
}

/* Run e's plan under its lock: a padded call (t) or a serving one (st). */
static at_status run_entry(plan_entry *e, const at_tensors *t, const at_serving_tensors *st, const at_fp8_args *fp8,
                           void *stream)
{
  if (pthread_mutex_lock(&e->run_lock) != 0) return fail(AT_ERR_INVALID, "attntune: cannot lock the plan");
  at_status rc = st ? at_plan_run_serving(e->plan, st, fp8, stream) : at_plan_run(e->plan, t, fp8, stream);
  pthread_mutex_unlock(&e->run_lock);
  if (rc != AT_OK) {
    char key[160];
    at_shape_key(&e->shape, key, sizeof key);
    return fail(rc, "at_plan_run%s(%s): %s: %s", st ? "_serving" : "", key, at_status_name(rc), at_last_error());
  }
  return AT_OK;
}

at_status atpy_plan_run(at_plan *plan, const at_tensors *t, const at_fp8_args *fp8, void *stream)
{
  plan_entry *e = entry_of(plan, "atpy_plan_run");
  return e ? run_entry(e, t, NULL, fp8, stream) : AT_ERR_INVALID;
}

at_status atpy_plan_run_serving(at_plan *plan, const at_serving_tensors *t, const at_fp8_args *fp8, void *stream)
{
  if (!t) return fail(AT_ERR_INVALID, "atpy_plan_run_serving: tensors are NULL");
  plan_entry *e = entry_of(plan, "atpy_plan_run_serving");
  return e ? run_entry(e, NULL, t, fp8, stream) : AT_ERR_INVALID;
}

int atpy_cache_size(void)
{
  if (pthread_mutex_lock(&g_lock) != 0) return -1;
  int n = g_n_plans;
  pthread_mutex_unlock(&g_lock);
  return n;
}

void atpy_cache_clear(void)
{
  if (pthread_mutex_lock(&g_lock) != 0) return;
  for (int i = 0; i < g_n_plans; i++) entry_free(g_plans[i]);
  free(g_plans);
  g_plans = NULL, g_n_plans = g_cap_plans = 0;
  for (int i = 0; i < g_n_ctx; i++) {
    at_context_destroy(g_ctx[i].ctx);
    free(g_ctx[i].db);
  }
  free(g_ctx);
  g_ctx = NULL, g_n_ctx = g_cap_ctx = 0;
  pthread_mutex_unlock(&g_lock);
}
