/*
 * api.c — the public library: contexts, plans and the lookup chain (include/attntune.h).
 *
 * Plan creation (under the context's lock) may read the cache, compile with NVRTC and load
 * modules; at_plan_run only checks its arguments and launches.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "generator/generator.h"
#include "runtime/cudnn_sdpa.h"
#include "runtime/api_internal.h"
#include "runtime/lookup.h"
#include "runtime/rt.h"

/* A loaded variant, shared by the plans that use it. */
typedef struct loaded_variant {
  char key[GEN_KEY_MAX];
  rt_variant lv;
} loaded_variant;

struct at_context {
  rt_ctx rt;
  cache_db *cache;
  int cache_writable;
  gen_target target;
  /* What cache rows are judged against (rt_lookup_chain): the GPU model, the joined template
   * version (every family's part, gen_templates_version), and this process's NVRTC and cuDNN. */
  cache_env now;
  char description[320];
  pthread_mutex_t lock; /* plan creation, the cache handle, the module table */
  loaded_variant *loaded;
  int n_loaded, cap_loaded;
};

typedef enum plan_kind { PLAN_FA2, PLAN_CUDNN, PLAN_NAIVE } plan_kind;

struct at_plan {
  at_context *ctx;
  at_shape shape;
  at_layout layout;
  /* The tensors' layout kinds; padded Q and K/V (layout.strides == layout above) for plans from
   * at_plan_create. Padded Q with paged K/V runs a paged decode variant or the naive kernels,
   * ragged Q with ragged or padded K/V a ragged fa3/fa2 variant, cuDNN's ragged graph or the
   * naive kernels; other ragged or paged plans only the naive kernels (include/attntune.h). */
  at_serving_layout serving;
  at_plan_info info;
  plan_kind kind;
  rt_variant kernel; /* a copy; the module belongs to the context */
  rt_cudnn_sdpa *cudnn;
  rt_naive naive;
  CUdeviceptr scratch;
};


static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

const char *at_choice_name(at_choice c)
{
  static const char *const NAMES[] = {"exact", "nearest", "default", "cudnn", "naive", "forced"};
  return (unsigned)c < sizeof NAMES / sizeof *NAMES ? NAMES[c] : "?";
}

static at_status bind_context(const at_context *c);

/* ---- contexts -------------------------------------------------------------------------------- */

at_status at_context_create(int device, const char *cache_path, unsigned flags, at_context **out)
{
  at_status rc;
  *out = NULL;
  at_context *c = calloc(1, sizeof *c);
  if (!c) return at_fail(AT_ERR_NOMEM, "no memory for a context");
  pthread_mutex_init(&c->lock, NULL);
  if ((rc = rt_ctx_open(device, &c->rt)) != AT_OK) goto fail;
  if ((rc = gen_target_make(c->rt.arch, c->rt.info.smem_per_block_optin, &c->target)) != AT_OK) goto fail;
  snprintf(c->now.gpu_model, sizeof c->now.gpu_model, "%.127s", c->rt.info.name);
  gen_templates_version(c->now.template_version, sizeof c->now.template_version);
  rt_nvrtc_version_text(c->now.nvrtc, sizeof c->now.nvrtc);
  /* cuDNN's version judges cache rows (a row that compared against another cuDNN is stale);
   * without a cache nothing needs it, and cuDNN is loaded when a plan first uses it. */
  if (cache_path) rt_cudnn_version_text(c->now.cudnn, sizeof c->now.cudnn);
  c->cache_writable = (flags & AT_CONTEXT_CACHE_WRITABLE) != 0;
  if (cache_path && (rc = cache_open(cache_path, c->cache_writable ? CACHE_WRITE : CACHE_READ, &c->cache)) != AT_OK) goto fail;
  snprintf(c->description, sizeof c->description, "%s (%s)", c->rt.info.name, c->rt.arch);
  *out = c;
  return AT_OK;
fail:
  at_context_destroy(c);
  return rc;
}

void at_context_destroy(at_context *c)
{
  if (!c) return;
  /* cuModuleUnload works on the current context, and the caller's thread may never have used
   * this one (or have another current): bind it, or the unloads may fail and leak the modules. */
  if (c->rt.context) (void)bind_context(c);
  for (int i = 0; i < c->n_loaded; i++) rt_variant_unload(&c->loaded[i].lv);
  free(c->loaded);
  cache_close(c->cache);
  if (c->rt.context) rt_ctx_close(&c->rt);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

const char *at_context_describe(const at_context *c) { return c ? c->description : ""; }

/* Make the context's GPU current on this thread (cheap when it already is). */
static at_status bind_context(const at_context *c)
{
  CUcontext current = NULL;
  if (rt_cu()->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == c->rt.context) return AT_OK;
  return rt_ctx_bind(&c->rt);
}

/* ---- variants: from the module table, the cache's cubins, or NVRTC ---------------------------- */

static loaded_variant *find_loaded(at_context *c, const char *key)
{
  for (int i = 0; i < c->n_loaded; i++)
    if (strcmp(c->loaded[i].key, key) == 0) return &c->loaded[i];
  return NULL;
}

static at_status remember_loaded(at_context *c, const char *key, const rt_variant *lv)
{
  if (c->n_loaded == c->cap_loaded) {
    int cap = c->cap_loaded ? 2 * c->cap_loaded : 16;
    loaded_variant *grown = realloc(c->loaded, (size_t)cap * sizeof *grown);
    if (!grown) return at_fail(AT_ERR_NOMEM, "no memory for the module table");
    c->loaded = grown, c->cap_loaded = cap;
  }
  loaded_variant *l = &c->loaded[c->n_loaded++];
  snprintf(l->key, sizeof l->key, "%s", key);
  l->lv = *lv;
  return AT_OK;
}

/* A cubin for v: the cache first, else NVRTC (stored back when the cache is writable). */
static at_status variant_cubin(at_context *c, const gen_variant *v, const char *key, void **cubin,
                               int *compiled)
{
  size_t size = 0;
  int found = 0;
  at_status rc;
  char version[48]; /* a cubin depends on its family's template only */
  gen_family_version(v->family, version, sizeof version);
  *compiled = 0;
  if (c->cache && (rc = cache_get_cubin(c->cache, key, c->rt.arch, version, cubin, &size, &found)) != AT_OK)
    return rc;
  if (found) return AT_OK;
  rt_compiled out;
  if ((rc = rt_compile_all(v, 1, &c->target, 1, &out)) != AT_OK) return rc;
  if (out.status != AT_OK) {
    rc = at_fail(out.status, "%s", out.message);
    rt_compiled_free(&out, 1);
    return rc;
  }
  *compiled = 1;
  if (c->cache && c->cache_writable) {
    char entry[GEN_KEY_MAX];
    gen_entry_name(v, entry, sizeof entry);
    /* A cache that cannot take the cubin costs the next process a compile, nothing more. */
    cache_put_cubin(c->cache, key, c->rt.arch, version, c->now.nvrtc, entry, out.binary.cubin,
                    out.binary.cubin_size);
  }
  *cubin = out.binary.cubin;
  out.binary.cubin = NULL;
  rt_compiled_free(&out, 1);
  return AT_OK;
}

/* Load v's cubin into the module table under key (the caller holds c->lock). */
static at_status load_into_table(at_context *c, const gen_variant *v, const char *key, const void *cubin)
{
  rt_variant lv;
  memset(&lv, 0, sizeof lv);
  at_status rc = rt_variant_load(v, cubin, &lv);
  if (rc == AT_OK) rc = remember_loaded(c, key, &lv);
  if (rc != AT_OK) rt_variant_unload(&lv);
  return rc;
}

at_status rt_context_adopt_cubin(at_context *c, const char *key, const void *cubin)
{
  gen_variant v;
  at_status rc = gen_variant_parse(key, &v);
  if (rc != AT_OK) return rc;
  if (!cubin) return at_fail(AT_ERR_INVALID, "no cubin given for %s", key);
  if ((rc = bind_context(c)) != AT_OK) return rc;
  pthread_mutex_lock(&c->lock);
  if (!find_loaded(c, key)) rc = load_into_table(c, &v, key, cubin);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

at_status rt_context_bind(const at_context *c, const char **arch)
{
  if (arch) *arch = c->rt.arch;
  return bind_context(c);
}

/* A layout the generated families cannot read; the message names the implementation and the
 * layout. */
static at_status refuse_serving(const at_plan *p, const char *impl, const char *why)
{
  char what[96];
  at_serving_layout_describe(&p->serving, what, sizeof what);
  return at_fail(AT_ERR_UNSUPPORTED, "unsupported: %s cannot run %s (%s; impl \"naive\" runs it)", impl, what, why);
}

/* The page size of the plan's K/V: its layout's when paged, else 0 (contiguous). */
static int plan_page_size(const at_plan *p)
{
  return p->serving.kv_layout == AT_SEQ_PAGED ? p->serving.page_size : 0;
}

/* Which tensors of the plan are ragged, as the generator names it (gen_ragged). */
static int plan_ragged(const at_plan *p)
{
  return rt_serving_ragged(&p->serving);
}

/* Generated kernels run padded Q with padded or paged K/V, and ragged Q with ragged, padded or
 * paged K/V; padded Q with ragged K/V only naive. */
static int generated_kernels_run(const at_serving_layout *l)
{
  return l->q_layout != AT_SEQ_PADDED || l->kv_layout != AT_SEQ_RAGGED;
}

static at_status use_variant(at_context *c, at_plan *p, const gen_variant *v)
{
  char key[GEN_KEY_MAX];
  at_status rc;
  if (!generated_kernels_run(&p->serving))
    return refuse_serving(p, gen_variant_key(v, key, sizeof key) == AT_OK ? key : "a generated kernel",
                          "no generated kernel reads padded Q with ragged K/V; fa2 and fa3 run ragged Q with ragged "
                          "or padded K/V, fa3 and fa2 ragged Q with paged K/V, decode, fa3 and fa2 padded Q with paged K/V");
  if ((rc = gen_variant_matches_serving(v, &p->shape, plan_page_size(p), plan_ragged(p))) != AT_OK) return rc;
  if ((rc = gen_variant_check(v, &c->target)) != AT_OK) return rc;
  if ((rc = gen_variant_key(v, key, sizeof key)) != AT_OK) return rc;
  /* Scratch (split-KV partials) is sized here, allocated below: at_plan_run allocates nothing. */
  size_t scratch = 0;
  if ((rc = rt_variant_scratch_bytes(v, &p->shape, &scratch)) != AT_OK) return rc;
  loaded_variant *l = find_loaded(c, key);
  if (!l) {
    void *cubin = NULL;
    rc = variant_cubin(c, v, key, &cubin, &p->info.compiled);
    if (rc == AT_OK) rc = load_into_table(c, v, key, cubin);
    free(cubin);
    if (rc != AT_OK) return rc;
    l = &c->loaded[c->n_loaded - 1];
  }
  if (scratch && (rc = rt_variant_scratch_alloc(v, &p->shape, &p->scratch)) != AT_OK) return rc;
  p->kind = PLAN_FA2;
  p->kernel = l->lv;
  snprintf(p->info.impl, sizeof p->info.impl, "%s", key);
  return AT_OK;
}

/* cuDNN's plan for the plan's tensors: the padded graphs, or for ragged Q with ragged or padded
 * K/V the ragged one (cudnn_sdpa.h), whose metadata kernels and scratch are made here. */
static at_status plan_cudnn(at_plan *p)
{
  if (!at_serving_is_padded(&p->serving)) return rt_cudnn_sdpa_plan_serving(p->cudnn, &p->shape, &p->serving, NULL);
  at_tensors t;
  memset(&t, 0, sizeof t);
  t.q_stride = p->layout.q, t.k_stride = p->layout.k, t.v_stride = p->layout.v, t.o_stride = p->layout.o;
  rt_cudnn_plan_info info;
  return rt_cudnn_sdpa_plan(p->cudnn, &p->shape, &t, NULL, &info);
}

static at_status use_cudnn(at_plan *p)
{
  char why[256];
  if (!rt_cudnn_serving_supported(&p->shape, &p->serving, why, sizeof why))
    return at_fail(AT_ERR_UNSUPPORTED, "unsupported: cudnn cannot run %s; impl \"naive\" runs it", why);
  if (at_dtype_is_fp8(p->shape.dtype))
    return at_fail(AT_ERR_UNSUPPORTED, "cuDNN's FP8 attention writes FP8 output; plans for FP8 inputs write bf16");
  if (at_shape_kv_dtype(&p->shape) != p->shape.dtype)
    return at_fail(AT_ERR_UNSUPPORTED, "attntune's cuDNN graphs take Q, K and V in one dtype, not %s Q with %s K/V",
                   at_dtype_name(p->shape.dtype), at_dtype_name(at_shape_kv_dtype(&p->shape)));
  at_status rc = rt_cudnn_sdpa_create(&p->ctx->rt, &p->cudnn);
  if (rc != AT_OK) return rc;
  if ((rc = plan_cudnn(p)) != AT_OK) {
    rt_cudnn_sdpa_destroy(p->cudnn);
    p->cudnn = NULL;
    return rc;
  }
  p->kind = PLAN_CUDNN;
  snprintf(p->info.impl, sizeof p->info.impl, "cudnn");
  return AT_OK;
}

static at_status use_naive(at_plan *p)
{
  at_status rc;
  /* Output in the input dtype, but bf16 for FP8 inputs, as the FP8 fa2 variants write (Q's dtype
   * with an FP8 KV cache). */
  at_dtype out = at_dtype_default_out(p->shape.dtype);
  if ((rc = rt_alloc(&p->scratch, rt_naive_scratch_bytes(&p->shape))) != AT_OK) return rc;
  if ((rc = rt_naive_create_kv(p->ctx->rt.arch, p->shape.dtype, at_shape_kv_dtype(&p->shape), out, &p->naive)) !=
      AT_OK) {
    rt_free(p->scratch);
    p->scratch = 0;
    return rc;
  }
  p->kind = PLAN_NAIVE;
  snprintf(p->info.impl, sizeof p->info.impl, "naive");
  return AT_OK;
}

/* ---- the lookup chain ------------------------------------------------------------------------ */

static void note(at_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(at_plan *p, const char *fmt, ...)
{
  size_t used = strlen(p->info.reason);
  if (used + 3 >= sizeof p->info.reason) return;
  if (used) p->info.reason[used++] = ';', p->info.reason[used++] = ' ';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->info.reason + used, sizeof p->info.reason - used, fmt, ap);
  va_end(ap);
}

/* Load one step's implementation into the plan. */
static at_status use_impl(at_plan *p, const char *impl)
{
  if (strcmp(impl, "cudnn") == 0) return use_cudnn(p);
  if (strcmp(impl, "naive") == 0) return use_naive(p);
  gen_variant v;
  at_status rc = gen_variant_parse(impl, &v);
  if (rc == AT_OK) rc = use_variant(p->ctx, p, &v);
  return rc;
}

/* Try the chain's steps in order; each that does not load says why in the plan's reason. */
static at_status choose(at_plan *p, const char *impl)
{
  at_context *c = p->ctx;
  at_status rc;
  /* "fused" keeps to the generated kernels; "fa2" is its older spelling; "decode" keeps to the
   * decode family's steps of that chain. */
  int auto_mode = !impl || strcmp(impl, "auto") == 0;
  int decode_only = impl && strcmp(impl, "decode") == 0;
  int fused_only = impl && (strcmp(impl, "fused") == 0 || strcmp(impl, "fa2") == 0 || decode_only);
  if (!auto_mode && !fused_only) {
    p->info.choice = AT_CHOICE_FORCED;
    if ((rc = use_impl(p, impl)) == AT_OK) note(p, "asked for %s", impl);
    return rc;
  }
  rt_lookup chain;
  rc = rt_lookup_chain_serving(c->cache, &c->now, &c->target, &p->shape, &p->serving, fused_only, &chain);
  if (rc != AT_OK) return rc;
  if (chain.skipped[0]) note(p, "%s", chain.skipped);
  for (int i = 0; i < chain.n_steps; i++) {
    const rt_lookup_step *s = &chain.steps[i];
    if (decode_only && strncmp(s->impl, "decode.", 7) != 0) {
      note(p, "%s (%s): not a decode variant, and impl \"decode\" was asked for", at_choice_name(s->choice), s->impl);
      continue;
    }
    if ((rc = use_impl(p, s->impl)) == AT_OK) {
      p->info.choice = s->choice;
      snprintf(p->info.tuned_shape, sizeof p->info.tuned_shape, "%s", s->tuned_shape);
      p->info.tuned_ms = s->tuned_ms;
      p->info.cudnn_ms = s->cudnn_ms;
      note(p, "%s%s", s->why, p->info.compiled ? " (compiled now)" : "");
      return AT_OK;
    }
    note(p, "%s (%s): %s", at_choice_name(s->choice), s->impl, at_last_error());
  }
  return at_fail(AT_ERR_UNSUPPORTED, "nothing can run this shape: %s", p->info.reason);
}

at_layout at_layout_bshd(const at_shape *s)
{
  at_layout l;
  l.q = l.o = at_strides_bshd(s->q_len, s->q_heads, s->head_dim);
  l.k = l.v = at_strides_bshd(s->kv_len, s->kv_heads, s->head_dim);
  return l;
}

/* Both creators: serving is a checked copy (padded Q and K/V for at_plan_create). */
static at_status create_plan(at_context *c, const at_shape *shape, const at_layout *layout,
                             const at_serving_layout *serving, const at_plan_options *opts, at_plan **out)
{
  at_status rc;
  double t0 = now_ms();
  at_plan *p = calloc(1, sizeof *p);
  if (!p) return at_fail(AT_ERR_NOMEM, "no memory for a plan");
  p->ctx = c;
  p->shape = *shape;
  p->layout = layout ? *layout : at_layout_bshd(shape);
  p->serving = *serving;
  p->info.tuned_ms = p->info.cudnn_ms = NAN;
  pthread_mutex_lock(&c->lock);
  rc = bind_context(c);
  if (rc == AT_OK) rc = choose(p, opts ? opts->impl : NULL);
  pthread_mutex_unlock(&c->lock);
  if (rc != AT_OK) {
    at_plan_destroy(p);
    return rc;
  }
  p->info.create_ms = now_ms() - t0;
  *out = p;
  return AT_OK;
}

at_status at_plan_create(at_context *c, const at_shape *shape, const at_layout *layout,
                         const at_plan_options *opts, at_plan **out)
{
  at_status rc;
  *out = NULL;
  if (!c) return at_fail(AT_ERR_INVALID, "context is NULL");
  if ((rc = at_shape_check(shape)) != AT_OK) return rc;
  at_serving_layout padded = at_serving_layout_make(shape, AT_SEQ_PADDED, AT_SEQ_PADDED, 0);
  if (layout) padded.strides = *layout;
  return create_plan(c, shape, layout, &padded, opts, out);
}

at_status at_plan_create_serving(at_context *c, const at_shape *shape, const at_serving_layout *layout,
                                 const at_plan_options *opts, at_plan **out)
{
  at_status rc;
  *out = NULL;
  if (!c) return at_fail(AT_ERR_INVALID, "context is NULL");
  if ((rc = at_shape_check(shape)) != AT_OK) return rc;
  at_serving_layout serving = at_serving_layout_make(shape, AT_SEQ_PADDED, AT_SEQ_PADDED, 0);
  if (layout && (rc = at_serving_layout_copy(shape, layout, &serving)) != AT_OK) return rc;
  return create_plan(c, shape, &serving.strides, &serving, opts, out);
}

void at_plan_destroy(at_plan *p)
{
  if (!p) return;
  /* A plan may be destroyed on another thread than the one that made it: its naive module and
   * scratch belong to the context's GPU, which must be current for the unload and the free. */
  (void)bind_context(p->ctx);
  if (p->cudnn) rt_cudnn_sdpa_destroy(p->cudnn);
  if (p->kind == PLAN_NAIVE) rt_naive_destroy(&p->naive);
  rt_free(p->scratch);
  free(p); /* variant modules belong to the context */
}

at_status at_plan_describe(const at_plan *p, at_plan_info *info)
{
  if (!p) return at_fail(AT_ERR_INVALID, "plan is NULL");
  *info = p->info;
  return AT_OK;
}

/* ---- running ------------------------------------------------------------------------------- */

static int same_strides(at_strides a, at_strides b)
{
  return a.batch == b.batch && a.seq == b.seq && a.head == b.head;
}

static at_status check_pointer(const void *ptr, const char *name)
{
  if (!ptr) return at_fail(AT_ERR_INVALID, "%s is NULL", name);
  if ((uintptr_t)ptr % 16) return at_fail(AT_ERR_INVALID, "%s (%p) is not 16-byte aligned", name, ptr);
  return AT_OK;
}

/* Pointers, strides and descales of a call, whichever struct carried them. */
static at_status check_tensors(const at_plan *p, const at_tensors *t, const at_fp8_args *fp8)
{
  at_status rc;
  if ((rc = check_pointer(t->q, "q")) != AT_OK || (rc = check_pointer(t->k, "k")) != AT_OK ||
      (rc = check_pointer(t->v, "v")) != AT_OK || (rc = check_pointer(t->o, "o")) != AT_OK)
    return rc;
  if (p->shape.with_lse && (rc = check_pointer(t->lse, "lse")) != AT_OK) return rc;
  const at_strides *want[4] = {&p->layout.q, &p->layout.k, &p->layout.v, &p->layout.o};
  const at_strides *got[4] = {&t->q_stride, &t->k_stride, &t->v_stride, &t->o_stride};
  static const char *const NAMES[4] = {"q", "k", "v", "o"};
  for (int i = 0; i < 4; i++)
    if (!same_strides(*want[i], *got[i]))
      return at_fail(AT_ERR_INVALID, "%s strides (%lld, %lld, %lld) differ from the plan's (%lld, %lld, %lld)",
                     NAMES[i], (long long)got[i]->batch, (long long)got[i]->seq, (long long)got[i]->head,
                     (long long)want[i]->batch, (long long)want[i]->seq, (long long)want[i]->head);
  if (at_dtype_is_fp8(p->shape.dtype) && !fp8)
    return at_fail(AT_ERR_INVALID, "an FP8 shape needs its descale pointers (at_fp8_args)");
  if (at_dtype_is_fp8(at_shape_kv_dtype(&p->shape)) && !fp8)
    return at_fail(AT_ERR_INVALID, "an FP8 KV cache needs its descale pointers (at_fp8_args: descale_k, descale_v)");
  return AT_OK;
}

static at_status check_run(const at_plan *p, const at_tensors *t, const at_fp8_args *fp8)
{
  if (!t) return at_fail(AT_ERR_INVALID, "tensors are NULL");
  if (!at_serving_is_padded(&p->serving)) {
    char what[96];
    at_serving_layout_describe(&p->serving, what, sizeof what);
    return at_fail(AT_ERR_INVALID, "this plan is for %s: run it with at_plan_run_serving (at_tensors has no "
                   "sequence offsets or block table)", what);
  }
  return check_tensors(p, t, fp8);
}

/* The tensors of an at_serving_tensors, as at_plan_run takes them. */
static at_tensors plain_tensors(const at_serving_tensors *t)
{
  at_tensors plain = {t->q, t->k, t->v, t->o, t->lse, t->q_stride, t->k_stride, t->v_stride, t->o_stride};
  return plain;
}

static at_status check_metadata_pointer(const void *ptr, const char *name)
{
  if (ptr && (uintptr_t)ptr % 4) return at_fail(AT_ERR_INVALID, "%s (%p) is not 4-byte aligned (int32 entries)", name, ptr);
  return AT_OK;
}

/* A serving call's host-side fields: the struct's version, tensors as check_tensors, metadata
 * pointers and counts as the plan's layout asks (the device arrays are not read). */
static at_status check_serving_run(const at_plan *p, const at_serving_tensors *given, const at_fp8_args *fp8,
                                   at_serving_tensors *t)
{
  at_status rc;
  if ((rc = at_versioned_copy("at_serving_tensors", given, sizeof *t, sizeof *t, t)) != AT_OK) return rc;
  at_tensors plain = plain_tensors(t);
  if ((rc = check_tensors(p, &plain, fp8)) != AT_OK) return rc;
  if ((rc = at_serving_fields_check(&p->shape, &p->serving, t)) != AT_OK) return rc;
  if ((rc = check_metadata_pointer(t->cu_seqlens_q, "cu_seqlens_q")) != AT_OK ||
      (rc = check_metadata_pointer(t->cu_seqlens_kv, "cu_seqlens_kv")) != AT_OK ||
      (rc = check_metadata_pointer(t->block_table, "block_table")) != AT_OK ||
      (rc = check_metadata_pointer(t->seqlens_kv, "seqlens_kv")) != AT_OK)
    return rc;
  return AT_OK;
}

/* The caller's FP8 scaling as a variant reads it (bf16 output: no scale_o, no amax); NULL for
 * 16-bit shapes. */
static const rt_fp8_args *variant_fp8(const at_fp8_args *fp8, rt_fp8_args *g)
{
  if (!fp8) return NULL;
  *g = (rt_fp8_args){fp8->descale_q, fp8->descale_k, fp8->descale_v, NULL, NULL};
  return g;
}

/* The same for the naive kernels: descale_q only for FP8 Q (with an FP8 KV cache it is not read,
 * attntune.h). */
static const rt_naive_descales *naive_descales(const at_plan *p, const at_fp8_args *fp8, rt_naive_descales *d)
{
  if (!fp8) return NULL;
  *d = (rt_naive_descales){at_dtype_is_fp8(p->shape.dtype) ? fp8->descale_q : NULL, fp8->descale_k, fp8->descale_v};
  return d;
}

static at_status launch(at_plan *p, const at_tensors *t, const at_fp8_args *fp8, CUstream stream)
{
  rt_fp8_args g;
  rt_naive_descales d;
  switch (p->kind) {
  case PLAN_FA2: return rt_variant_launch(&p->kernel, &p->shape, t, variant_fp8(fp8, &g), p->scratch, stream);
  case PLAN_NAIVE: return rt_naive_run_fp8(&p->naive, &p->shape, t, naive_descales(p, fp8, &d), p->scratch, stream);
  case PLAN_CUDNN: return rt_cudnn_sdpa_run(p->cudnn, &p->shape, t, NULL, stream);
  }
  return at_fail(AT_ERR_INVALID, "plan of unknown kind");
}

at_status at_plan_run(at_plan *p, const at_tensors *t, const at_fp8_args *fp8, void *stream)
{
  at_status rc;
  if (!p) return at_fail(AT_ERR_INVALID, "plan is NULL");
  if ((rc = check_run(p, t, fp8)) != AT_OK) return rc;
  if ((rc = bind_context(p->ctx)) != AT_OK) return rc;
  return launch(p, t, fp8, (CUstream)stream);
}

/* A paged or ragged variant: the tensors as at_plan_run takes them (paged K/V: the pools, with
 * the page stride as their batch stride; packed tensors: batch strides 0), and the block table,
 * lengths and bounds (paged K/V) and the offsets with the packed totals (ragged Q). Nothing is
 * allocated. */
static at_status launch_serving_variant(at_plan *p, const at_serving_tensors *t, const at_fp8_args *fp8,
                                        CUstream stream)
{
  at_tensors plain = plain_tensors(t);
  const int kv_packed = p->serving.kv_layout == AT_SEQ_RAGGED;
  rt_paged_args paged = {t->block_table, t->seqlens_kv, p->serving.max_pages_per_seq, t->num_pages};
  rt_ragged_args ragged = {t->cu_seqlens_q, kv_packed ? t->cu_seqlens_kv : NULL, t->total_q,
                           kv_packed ? t->total_kv : 0};
  rt_fp8_args g;
  return rt_variant_launch_serving(&p->kernel, &p->shape, &plain, variant_fp8(fp8, &g),
                                   plan_page_size(p) ? &paged : NULL, plan_ragged(p) ? &ragged : NULL, p->scratch,
                                   stream);
}

/* A checked serving call: padded plans launch as at_plan_run does; paged K/V with padded Q runs a
 * paged decode or fa2 variant or the naive kernels; ragged Q with ragged or padded K/V a ragged
 * fa2/fa3 variant, cuDNN's ragged graph or the naive kernels, with paged K/V a paged ragged fa2
 * variant or the naive kernels. */
static at_status launch_serving(at_plan *p, const at_serving_tensors *t, const at_fp8_args *fp8, CUstream stream)
{
  if (at_serving_is_padded(&p->serving)) {
    at_tensors plain = plain_tensors(t);
    return launch(p, &plain, fp8, stream);
  }
  if (p->kind == PLAN_FA2 && (plan_page_size(p) || plan_ragged(p))) return launch_serving_variant(p, t, fp8, stream);
  if (p->kind == PLAN_CUDNN) return rt_cudnn_sdpa_run_serving(p->cudnn, &p->shape, &p->serving, t, stream);
  if (p->kind != PLAN_NAIVE) return at_fail(AT_ERR_INVALID, "a %s plan for a serving layout", p->info.impl);
  rt_naive_descales d;
  return rt_naive_run_serving(&p->naive, &p->shape, &p->serving, t, naive_descales(p, fp8, &d), p->scratch, stream);
}

at_status at_plan_run_serving(at_plan *p, const at_serving_tensors *t, const at_fp8_args *fp8, void *stream)
{
  at_status rc;
  at_serving_tensors copy;
  if (!p) return at_fail(AT_ERR_INVALID, "plan is NULL");
  if ((rc = check_serving_run(p, t, fp8, &copy)) != AT_OK) return rc;
  if ((rc = bind_context(p->ctx)) != AT_OK) return rc;
  return launch_serving(p, &copy, fp8, (CUstream)stream);
}

/* One timed call: plain tensors (t) or a serving call's (serving). */
typedef struct bench_call {
  at_plan *plan;
  const at_tensors *t;
  const at_serving_tensors *serving;
  const at_fp8_args *fp8;
} bench_call;

static at_status bench_launch(void *user, int set, CUstream stream)
{
  (void)set;
  bench_call *b = user;
  if (b->serving) return launch_serving(b->plan, b->serving, b->fp8, stream);
  return launch(b->plan, b->t, b->fp8, stream);
}

static at_status time_call(bench_call *call, int warmup, int reps, double *median_ms)
{
  at_status rc;
  if ((rc = bind_context(call->plan->ctx)) != AT_OK) return rc;
  rt_timing_opts opts = {.warmup = warmup, .reps = reps};
  rt_timing tm;
  if ((rc = rt_time_launches(bench_launch, call, 1, &opts, NULL, &tm)) != AT_OK) return rc;
  *median_ms = tm.median_ms;
  return AT_OK;
}

at_status at_plan_benchmark_serving(at_plan *p, const at_serving_tensors *t, const at_fp8_args *fp8, int warmup,
                                    int reps, double *median_ms)
{
  at_status rc;
  at_serving_tensors copy;
  if (!p) return at_fail(AT_ERR_INVALID, "plan is NULL");
  if ((rc = check_serving_run(p, t, fp8, &copy)) != AT_OK) return rc;
  bench_call call = {p, NULL, &copy, fp8};
  return time_call(&call, warmup, reps, median_ms);
}

at_status at_plan_benchmark(at_plan *p, const at_tensors *t, const at_fp8_args *fp8, int warmup, int reps,
                            double *median_ms)
{
  at_status rc;
  if (!p) return at_fail(AT_ERR_INVALID, "plan is NULL");
  if ((rc = check_run(p, t, fp8)) != AT_OK) return rc;
  bench_call call = {p, t, NULL, fp8};
  return time_call(&call, warmup, reps, median_ms);
}

/* ---- checking a call's metadata on the host ------------------------------------------------ */

/* n int32 of a device array into a fresh host buffer (NULL stays NULL). */
static at_status download_ints(const int32_t *dev, size_t n, int32_t **host)
{
  *host = NULL;
  if (!dev || n == 0) return AT_OK;
  if (!(*host = malloc(n * sizeof **host))) return at_fail(AT_ERR_NOMEM, "no memory for %zu metadata entries", n);
  return rt_download(*host, (CUdeviceptr)(uintptr_t)dev, n * sizeof **host);
}

/* cuDNN's paged graph loads a sequence's whole table row (max_pages_per_seq entries), not only
 * the pages its length uses, so every entry must name a page of the pool. */
static at_status check_whole_table(const at_plan *p, const int32_t *table, int num_pages)
{
  const int rows = p->shape.batch, cols = p->serving.max_pages_per_seq;
  for (int b = 0; b < rows; b++)
    for (int i = 0; i < cols; i++) {
      const int32_t page = table[(size_t)b * cols + i];
      if (page < 0 || page >= num_pages)
        return at_fail(AT_ERR_INVALID,
                       "block_table[%d][%d] = %d is outside the pool (num_pages %d): cuDNN's paged graph reads every "
                       "entry of a sequence's row (max_pages_per_seq %d), not only those its length uses; point "
                       "unused entries at any page of the pool",
                       b, i, page, num_pages, cols);
    }
  return AT_OK;
}

at_status at_serving_check(const at_plan *p, const at_serving_tensors *given)
{
  at_status rc;
  at_serving_tensors t, host;
  if (!p) return at_fail(AT_ERR_INVALID, "plan is NULL");
  if ((rc = at_versioned_copy("at_serving_tensors", given, sizeof t, sizeof t, &t)) != AT_OK) return rc;
  if ((rc = at_serving_fields_check(&p->shape, &p->serving, &t)) != AT_OK) return rc;
  if ((rc = bind_context(p->ctx)) != AT_OK) return rc;
  host = t;
  int32_t *cu_q = NULL, *cu_kv = NULL, *table = NULL, *lens = NULL;
  const size_t batch = (size_t)p->shape.batch;
  if ((rc = download_ints(t.cu_seqlens_q, batch + 1, &cu_q)) == AT_OK &&
      (rc = download_ints(t.cu_seqlens_kv, batch + 1, &cu_kv)) == AT_OK &&
      (rc = download_ints(t.block_table, batch * (size_t)p->serving.max_pages_per_seq, &table)) == AT_OK &&
      (rc = download_ints(t.seqlens_kv, batch, &lens)) == AT_OK) {
    host.cu_seqlens_q = cu_q, host.cu_seqlens_kv = cu_kv, host.block_table = table, host.seqlens_kv = lens;
    rc = at_serving_check_host(&p->shape, &p->serving, &host);
    if (rc == AT_OK && p->kind == PLAN_CUDNN && p->serving.kv_layout == AT_SEQ_PAGED)
      rc = check_whole_table(p, table, t.num_pages);
  }
  free(cu_q), free(cu_kv), free(table), free(lens);
  return rc;
}

/* ---- device memory ----------------------------------------------------------------------------- */

at_status at_device_alloc(at_context *c, size_t bytes, void **ptr)
{
  CUdeviceptr d = 0;
  at_status rc = bind_context(c);
  if (rc == AT_OK) rc = rt_alloc(&d, bytes);
  *ptr = (void *)(uintptr_t)d;
  return rc;
}

void at_device_free(at_context *c, void *ptr)
{
  if (ptr && bind_context(c) == AT_OK) rt_free((CUdeviceptr)(uintptr_t)ptr);
}

at_status at_copy_to_device(at_context *c, void *dst, const void *src, size_t bytes)
{
  at_status rc = bind_context(c);
  return rc == AT_OK ? rt_upload((CUdeviceptr)(uintptr_t)dst, src, bytes) : rc;
}

at_status at_copy_to_host(at_context *c, void *dst, const void *src, size_t bytes)
{
  at_status rc = bind_context(c);
  return rc == AT_OK ? rt_download(dst, (CUdeviceptr)(uintptr_t)src, bytes) : rc;
}

at_status at_synchronize(at_context *c)
{
  at_status rc = bind_context(c);
  return rc == AT_OK ? rt_ctx_sync(&c->rt) : rc;
}

at_status rt_plan_kernel(const at_plan *p, rt_variant *kernel, CUdeviceptr *scratch)
{
  if (!p || p->kind != PLAN_FA2) return at_fail(AT_ERR_INVALID, "not a plan of a generated kernel");
  *kernel = p->kernel;
  *scratch = p->scratch;
  return AT_OK;
}
