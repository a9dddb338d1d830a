/* lookup.c — see lookup.h. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cudnn_sdpa.h"
#include "runtime/lookup.h"
#include "runtime/rt.h"

static void skip(rt_lookup *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(char *buf, size_t size, const char *text);

static void skip(rt_lookup *l, const char *fmt, ...)
{
  size_t used = strlen(l->skipped);
  if (used + 3 >= sizeof l->skipped) return;
  if (used) l->skipped[used++] = ';', l->skipped[used++] = ' ';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->skipped + used, sizeof l->skipped - used, fmt, ap);
  va_end(ap);
}

static rt_lookup_step *add(rt_lookup *l, at_choice choice, const char *impl)
{
  rt_lookup_step *s = &l->steps[l->n_steps++];
  memset(s, 0, sizeof *s);
  s->choice = choice;
  s->tuned_ms = s->cudnn_ms = NAN;
  snprintf(s->impl, sizeof s->impl, "%s", impl);
  return s;
}

static void from_row(rt_lookup_step *s, const cache_best *b)
{
  at_shape_key(&b->shape, s->tuned_shape, sizeof s->tuned_shape);
  append(s->tuned_shape, sizeof s->tuned_shape, b->serving);
  s->tuned_ms = b->time_ms;
  s->cudnn_ms = b->cudnn_ms;
}

/* Same kind of problem: what a variant is specialized for (dtypes of Q and of K/V, head dim, mask,
 * GQA ratio, log-sum-exp); the sizes may differ. */
static int same_kind(const at_shape *a, const at_shape *b)
{
  return a->dtype == b->dtype && at_shape_kv_dtype(a) == at_shape_kv_dtype(b) && a->head_dim == b->head_dim &&
         a->mask == b->mask &&
         a->with_lse == b->with_lse && a->q_heads / a->kv_heads == b->q_heads / b->kv_heads;
}

/* Distance between shapes of one kind: log-ratios of the sizes that set a kernel's best tiles. */
static double shape_distance(const at_shape *a, const at_shape *b)
{
  return fabs(log((double)a->q_len / b->q_len)) + fabs(log((double)a->kv_len / b->kv_len)) +
         0.5 * fabs(log((double)a->batch * a->q_heads / ((double)b->batch * b->q_heads)));
}

int rt_row_usable(const cache_best *row, const cache_env *now, int *stale, char *why, size_t why_size)
{
  *stale = 0;
  if (!gen_version_current(row->env.template_version, now->template_version, row->impl, why, why_size)) return 0;
  *stale = cache_best_stale(&row->env, now, row->impl, why, why_size);
  return 1;
}

/* Appends text to buf (size bytes), cutting it where the buffer ends. */
static void append(char *buf, size_t size, const char *text)
{
  size_t used = strnlen(buf, size), n = strlen(text);
  if (used + 1 >= size) return;
  if (n > size - used - 1) n = size - used - 1;
  memcpy(buf + used, text, n);
  buf[used + n] = '\0';
}

/* The row's words, and for a row measured with another cuDNN or NVRTC what changed. */
static void describe_row(rt_lookup_step *s, const char *said, int stale, const char *stale_why)
{
  s->why[0] = '\0';
  append(s->why, sizeof s->why, said);
  if (stale) {
    append(s->why, sizeof s->why, "; stale: ");
    append(s->why, sizeof s->why, stale_why);
    append(s->why, sizeof s->why, " ('attntune tune' retimes it)");
  }
  s->stale = stale;
}

typedef struct nearest {
  const at_shape *shape;
  const cache_env *now;
  int fused_only;
  double distance;
  cache_best row;
  int found, skipped_templates, stale;
  char stale_why[384];
} nearest;

static int visit(void *user, const cache_best *b)
{
  nearest *n = user;
  char key_a[160], key_b[160];
  at_shape_key(&b->shape, key_a, sizeof key_a);
  at_shape_key(n->shape, key_b, sizeof key_b);
  /* A serving row's kernel reads packed or paged tensors: never one for padded tensors. */
  if (b->serving[0] || !same_kind(&b->shape, n->shape) || strcmp(key_a, key_b) == 0) return 0;
  char why[384];
  int stale = 0;
  if (!rt_row_usable(b, n->now, &stale, why, sizeof why)) return n->skipped_templates++, 0;
  if (n->fused_only && strcmp(b->impl, "cudnn") == 0) return 0;
  double d = shape_distance(&b->shape, n->shape);
  if (n->found && d >= n->distance) return 0;
  n->row = *b;
  n->row.cubin = NULL; /* owned by the iteration; plans fetch cubins by key */
  n->row.cubin_size = 0;
  n->distance = d;
  n->found = 1;
  n->stale = stale;
  snprintf(n->stale_why, sizeof n->stale_why, "%s", why);
  return 0;
}

static at_status exact_step(cache_db *cache, const cache_env *now, const at_shape *shape, int fused_only,
                            rt_lookup *l)
{
  cache_best b;
  int found = 0, stale = 0;
  at_status rc = cache_get_best(cache, now->gpu_model, shape, NULL, &b, &found);
  if (rc != AT_OK) return rc;
  char why[384], said[384];
  if (!found) skip(l, "exact: no tuned kernel stored for this shape on %s", now->gpu_model);
  else if (!rt_row_usable(&b, now, &stale, why, sizeof why))
    skip(l, "exact: %s", why);
  else if (fused_only && strcmp(b.impl, "cudnn") == 0)
    skip(l, "exact: cuDNN measured fastest, and generated kernels were asked for");
  else {
    rt_lookup_step *s = add(l, AT_CHOICE_EXACT, b.impl);
    from_row(s, &b);
    snprintf(said, sizeof said, "tuned for this shape on %s: %s %.4f ms%s", now->gpu_model, b.impl, b.time_ms,
             strcmp(b.impl, "cudnn") == 0 ? " (cuDNN measured fastest)" : "");
    describe_row(s, said, stale, why);
  }
  cache_best_clear(&b);
  return AT_OK;
}

static at_status nearest_step(cache_db *cache, const cache_env *now, const at_shape *shape, int fused_only,
                              rt_lookup *l)
{
  nearest n;
  memset(&n, 0, sizeof n);
  n.shape = shape, n.now = now, n.fused_only = fused_only;
  at_status rc = cache_each_best(cache, now->gpu_model, visit, &n);
  if (rc != AT_OK) return rc;
  if (!n.found) {
    skip(l, "nearest: no other tuned shape of the same kind on %s%s", now->gpu_model,
         n.skipped_templates ? " with this library's templates" : "");
    return AT_OK;
  }
  rt_lookup_step *s = add(l, AT_CHOICE_NEAREST, n.row.impl);
  from_row(s, &n.row);
  char row_key[160], said[384];
  at_shape_key(&n.row.shape, row_key, sizeof row_key);
  snprintf(said, sizeof said, "nearest tuned shape %s: %s %.4f ms there", row_key, n.row.impl, n.row.time_ms);
  describe_row(s, said, n.stale, n.stale_why);
  return AT_OK;
}

at_status rt_lookup_chain(cache_db *cache, const cache_env *now, const gen_target *target, const at_shape *shape,
                          int fused_only, rt_lookup *l)
{
  at_status rc;
  memset(l, 0, sizeof *l);
  if ((rc = at_shape_check(shape)) != AT_OK) return rc;
  if (cache) {
    if ((rc = exact_step(cache, now, shape, fused_only, l)) != AT_OK) return rc;
    if ((rc = nearest_step(cache, now, shape, fused_only, l)) != AT_OK) return rc;
  } else {
    skip(l, "no cache");
  }
  gen_variant v;
  char key[GEN_KEY_MAX];
  if (gen_default_variant(shape, target, &v) == AT_OK && gen_variant_key(&v, key, sizeof key) == AT_OK) {
    rt_lookup_step *s = add(l, AT_CHOICE_DEFAULT, key);
    snprintf(s->why, sizeof s->why, "the generator's default for %s", target->arch);
  } else {
    skip(l, "generator default: %s", at_last_error());
  }
  if (fused_only) return AT_OK;
  if (at_dtype_is_fp8(shape->dtype))
    skip(l, "cuDNN: its FP8 attention writes FP8, and plans for FP8 inputs write bf16");
  else if (at_shape_kv_dtype(shape) != shape->dtype)
    skip(l, "cuDNN: attntune's cuDNN graphs take Q, K and V in one dtype (not an FP8 KV cache)");
  else
    snprintf(add(l, AT_CHOICE_CUDNN, "cudnn")->why, sizeof l->steps[0].why, "cuDNN");
  snprintf(add(l, AT_CHOICE_NAIVE, "naive")->why, sizeof l->steps[0].why, "the naive kernels");
  return AT_OK;
}

/* ---- serving layouts: the exact step --------------------------------------------------------- */

/* The sum of a serving part's length buckets (".lq512.lkv1024": 1536). */
static long long bucket_sum(const char *serving)
{
  long long sum = 0;
  for (const char *p = strstr(serving, ".l"); p; p = strstr(p + 2, ".l")) {
    const char *digits = p + 2 + (p[2] == 'q' ? 1 : p[2] == 'k' && p[3] == 'v' ? 2 : 0);
    sum += strtoll(digits, NULL, 10);
  }
  return sum;
}

typedef struct serving_exact {
  const at_shape *shape;
  const at_serving_layout *layout;
  const cache_env *now;
  int fused_only;
  char shape_key[160], layout_key[64]; /* the plan's at_shape_key, and its layout part */
  cache_best row;
  int found, refused, stale;
  char stale_why[384];
  char refusal[160 + CACHE_SERVING_CAP + 2 + 384]; /* "<shape key><serving>: <why>", whole */
} serving_exact;

/* Why the implementation of a row of this shape and layout cannot run the plan, or "" when it can:
 * a variant must read this layout (ragged tensors, or paged K/V at this page size); cuDNN must
 * run it (its ragged graph) and be allowed. */
static void serving_impl_refusal(const serving_exact *x, const char *impl, char *why, size_t size)
{
  why[0] = '\0';
  if (strcmp(impl, "cudnn") == 0) {
    char reason[256];
    if (x->fused_only) snprintf(why, size, "cuDNN measured fastest, and generated kernels were asked for");
    else if (!rt_cudnn_serving_supported(x->shape, x->layout, reason, sizeof reason))
      snprintf(why, size, "it names cuDNN, which cannot run it: %s", reason);
    return;
  }
  gen_variant v;
  const int page_size = x->layout->kv_layout == AT_SEQ_PAGED ? x->layout->page_size : 0;
  if (gen_variant_parse(impl, &v) != AT_OK ||
      gen_variant_matches_serving(&v, x->shape, page_size, rt_serving_ragged(x->layout)) != AT_OK)
    snprintf(why, size, "its kernel %s does not read this layout: %s", impl, at_last_error());
}

/* Rows of the plan's shape key whose serving part is the plan's layout followed by nothing but
 * length buckets; of those that can run the plan, the one tuned at the longest lengths (the
 * plan's maxima bound every call it gets). */
static int visit_serving(void *user, const cache_best *b)
{
  serving_exact *x = user;
  char key[160], why[384];
  const size_t n = strlen(x->layout_key);
  at_shape_key(&b->shape, key, sizeof key);
  if (strcmp(key, x->shape_key) != 0 || strncmp(b->serving, x->layout_key, n) != 0) return 0;
  if (b->serving[n] && strncmp(b->serving + n, ".l", 2) != 0) return 0; /* .kvpaged16 is not .kvpaged1 */
  int stale = 0;
  if (!rt_row_usable(b, x->now, &stale, why, sizeof why)) {
    snprintf(x->refusal, sizeof x->refusal, "%s%s: %s", key, b->serving, why);
    return x->refused++, 0;
  }
  serving_impl_refusal(x, b->impl, why, sizeof why);
  if (why[0]) {
    snprintf(x->refusal, sizeof x->refusal, "%s%s: %s", key, b->serving, why);
    return x->refused++, 0;
  }
  if (x->found && bucket_sum(b->serving) <= bucket_sum(x->row.serving)) return 0;
  x->row = *b;
  x->row.cubin = NULL; /* owned by the iteration; plans fetch cubins by key */
  x->row.cubin_size = 0;
  x->found = 1;
  x->stale = stale;
  snprintf(x->stale_why, sizeof x->stale_why, "%s", why);
  return 0;
}

/* The exact step of a serving plan: a tuned row of the same shape and layout (any length mix of
 * it: the plan does not know its lengths), else a skip that says why. There is no nearest step:
 * the rows of other maxima were tuned for other tiles of the sequences. */
static at_status exact_serving_step(cache_db *cache, const cache_env *now, const at_shape *shape,
                                    const at_serving_layout *layout, int fused_only, rt_lookup *l)
{
  serving_exact x;
  memset(&x, 0, sizeof x);
  x.shape = shape, x.layout = layout, x.now = now, x.fused_only = fused_only;
  at_shape_key(shape, x.shape_key, sizeof x.shape_key);
  /* without length buckets: a plan is made before its lengths are known */
  at_serving_part(shape, layout, NULL, NULL, x.layout_key, sizeof x.layout_key);
  at_status rc = cache_each_best(cache, now->gpu_model, visit_serving, &x);
  if (rc != AT_OK) return rc;
  if (!x.found && x.refused)
    skip(l, "exact: %d tuned row%s of this shape and layout refused (%s)", x.refused, x.refused == 1 ? "" : "s",
         x.refusal);
  else if (!x.found)
    skip(l, "exact: no tuned kernel stored for %s%s on %s", x.shape_key, x.layout_key, now->gpu_model);
  if (x.found) {
    char said[384];
    rt_lookup_step *s = add(l, AT_CHOICE_EXACT, x.row.impl);
    from_row(s, &x.row);
    const char *buckets = x.row.serving + strlen(x.layout_key); /* ".lq512.lkv512", or "" */
    snprintf(said, sizeof said, "tuned for this shape and layout on %s (lengths %s): %s %.4f ms%s", now->gpu_model,
             buckets[0] ? buckets + 1 : "not bucketed", x.row.impl, x.row.time_ms,
             strcmp(x.row.impl, "cudnn") == 0 ? " (cuDNN's ragged graph measured fastest)" : "");
    describe_row(s, said, x.stale, x.stale_why);
  }
  skip(l, "nearest: not searched for ragged or paged tensors (only rows of this shape and layout are used)");
  return AT_OK;
}

/* The exact step where a cache is open; "no cache" said otherwise. */
static at_status tuned_serving_step(cache_db *cache, const cache_env *now, const at_shape *shape,
                                    const at_serving_layout *layout, int fused_only, rt_lookup *l)
{
  if (!cache) return skip(l, "no cache"), AT_OK;
  return exact_serving_step(cache, now, shape, layout, fused_only, l);
}

at_status rt_lookup_chain_serving(cache_db *cache, const cache_env *now, const gen_target *target,
                                  const at_shape *shape, const at_serving_layout *layout, int fused_only,
                                  rt_lookup *l)
{
  at_status rc;
  if (!layout || at_serving_is_padded(layout)) return rt_lookup_chain(cache, now, target, shape, fused_only, l);
  memset(l, 0, sizeof *l);
  if ((rc = at_serving_layout_check(shape, layout)) != AT_OK) return rc;
  char what[96];
  at_serving_layout_describe(layout, what, sizeof what);
  /* Only rows tuned for this layout are used (a padded shape's kernel would read the packed or
   * paged tensors as if they were padded); then padded Q with paged K/V has the paged default
   * (the decode family's for queries of 1 to GEN_DECODE_MAX_T tokens, else fa2's); ragged Q with
   * ragged, padded or paged K/V the ragged prefill default. */
  if (layout->q_layout == AT_SEQ_PADDED && layout->kv_layout == AT_SEQ_PAGED) {
    gen_variant v;
    char key[GEN_KEY_MAX];
    if ((rc = tuned_serving_step(cache, now, shape, layout, fused_only, l)) != AT_OK) return rc;
    if (gen_default_variant_paged(shape, layout->page_size, target, &v) == AT_OK &&
        gen_variant_key(&v, key, sizeof key) == AT_OK) {
      rt_lookup_step *s = add(l, AT_CHOICE_DEFAULT, key);
      snprintf(s->why, sizeof s->why, "the generator's paged %s default for %s (page size %d)",
               shape->q_len <= GEN_DECODE_MAX_T ? "decode" : "prefill", target->arch, layout->page_size);
    } else {
      skip(l, "generator default: %s", at_last_error());
    }
  } else if (rt_serving_ragged(layout) != GEN_RAGGED_NONE) {
    gen_variant v;
    char key[GEN_KEY_MAX];
    const int ragged = rt_serving_ragged(layout);
    if ((rc = tuned_serving_step(cache, now, shape, layout, fused_only, l)) != AT_OK) return rc;
    const int page_size = layout->kv_layout == AT_SEQ_PAGED ? layout->page_size : 0;
    if (gen_default_variant_serving(shape, page_size, ragged, target, &v) == AT_OK &&
        gen_variant_key(&v, key, sizeof key) == AT_OK) {
      rt_lookup_step *s = add(l, AT_CHOICE_DEFAULT, key);
      snprintf(s->why, sizeof s->why, "the generator's ragged prefill default for %s (%s)", target->arch, what);
    } else {
      skip(l, "generator default: %s", at_last_error());
    }
  } else {
    skip(l, "exact, nearest and generator default: unsupported: %s (no generated kernel reads it: fa2 and fa3 run "
            "ragged Q with ragged or padded K/V, fa3 and fa2 ragged Q with paged K/V, decode, fa3 and fa2 padded Q "
            "with paged K/V)", what);
  }
  if (fused_only) return AT_OK;
  char why[256];
  if (rt_cudnn_serving_supported(shape, layout, why, sizeof why))
    snprintf(add(l, AT_CHOICE_CUDNN, "cudnn")->why, sizeof l->steps[0].why, "cuDNN's %s graph (%s)",
             layout->kv_layout == AT_SEQ_PAGED ? "paged" : "ragged", what);
  else
    skip(l, "cuDNN: unsupported: %s", why);
  snprintf(add(l, AT_CHOICE_NAIVE, "naive")->why, sizeof l->steps[0].why, "the naive kernels (%s)", what);
  return AT_OK;
}

int rt_serving_ragged(const at_serving_layout *layout)
{
  if (!layout || layout->q_layout != AT_SEQ_RAGGED) return GEN_RAGGED_NONE;
  /* Q packed and K/V not: padded, or paged (pages are not packed rows) */
  return layout->kv_layout == AT_SEQ_RAGGED ? GEN_RAGGED_QKV : GEN_RAGGED_Q;
}
