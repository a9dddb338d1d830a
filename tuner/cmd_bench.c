/*
 * cmd_bench.c — `attntune bench`: time implementations of one attention shape with the same
 * timing code (tuner/timing.c), after verifying each against the naive reference on the same
 * inputs. Implementations: naive (the three-kernel path, output in the input dtype), cudnn
 * (composite graph), cudnn-unified (the single fused op), fa2 (every variant the generator lists;
 * the fastest is marked), fa2-default, or a variant key.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/generator.h"
#include "runtime/cudnn_sdpa.h"
#include "tuner/cli.h"
#include "tuner/commands.h"
#include "tuner/reference.h"
#include "tuner/timing.h"

enum { MAX_SETS = 16 };

static const char USAGE[] =
    "usage: attntune bench [--impl LIST] [shape options] [--warmup N] [--reps N] [--device N]\n"
    "                      [--no-verify] [--seed N]\n"
    "\n"
    "Times attention implementations on one shape with CUDA events (warm-up, then the median of\n"
    "back-to-back launches, inputs rotated so together they exceed twice the L2), after checking\n"
    "each output against the naive fp32 reference on the same random inputs.\n"
    "\n"
    "  --impl LIST        comma-separated, in order (default naive,cudnn,fa2-default):\n"
    "                       naive          the three-kernel reference path (output in the dtype)\n"
    "                       cudnn          cuDNN's fused attention, composite graph\n"
    "                       cudnn-unified  cuDNN's single SDPA op (no masks; cuDNN >= 9.13.1)\n"
    "                       fa2            every fa2 variant listed for the shape; * marks the best\n"
    "                       fa2-default    the fa2 variant used when nothing is tuned\n"
    "                       KEY            one variant, e.g. fa2.bf16.d128.none.g1.bm128.bn64.w4.s2\n"
    "shape:\n"
    "  --batch N          B (default 2)\n"
    "  --seq-len N        T and S together (default 1024)\n"
    "  --q-len N          T, queries\n"
    "  --kv-len N         S, keys and values\n"
    "  --q-heads N        Nq (default 16)\n"
    "  --kv-heads N       Nkv, divides Nq (default Nq)\n"
    "  --head-dim N       D (default 128)\n"
    "  --dtype T          f16 or bf16 (default bf16)\n"
    "  --causal           causal mask, top-left\n"
    "  --causal-br        causal mask, bottom-right\n"
    "  --lse              also write and check the log-sum-exp\n"
    "  --scale X          softmax scale (default 1/sqrt(D))\n"
    "timing:\n"
    "  --warmup N         launches before timing (default 10)\n"
    "  --reps N           timed launches (default 50)\n"
    "  --device N         GPU ordinal (default 0)\n"
    "  --no-verify        skip the reference check\n"
    "  --seed N           input seed (default: fresh each run)\n"
    "\n"
    "TFLOP/s = 4*B*Nq*T*S*D / time, halved for causal with T = S (DESIGN.md).\n";

typedef struct bench_opts {
  at_shape shape;
  char impls[2048];
  tn_timing_opts timing;
  int device;
  int verify;
  unsigned long long seed;
} bench_opts;

/* Device inputs (rotated sets), the output, and the reference. */
typedef struct bench_data {
  rt_ctx ctx;
  at_shape shape;
  int n_sets;
  CUdeviceptr q[MAX_SETS], k[MAX_SETS], v[MAX_SETS];
  CUdeviceptr o, lse, scratch;
  size_t n_q, n_kv, n_lse;
  double *ref_o, *ref_lse; /* host, from the naive fp32 reference on set 0 */
  float *got;              /* host staging for outputs */
  rt_cudnn_sdpa *cudnn;
} bench_data;

typedef enum impl_kind { IMPL_NAIVE, IMPL_CUDNN, IMPL_FA2 } impl_kind;

typedef struct bench_impl {
  impl_kind kind;
  char name[GEN_KEY_MAX];
  bench_data *data;
  rt_naive naive;
  rt_cudnn_path path;
  gen_variant variant;
  CUmodule module;
  CUfunction fn;
} bench_impl;

static at_tensors tensors_for(const bench_data *d, int set)
{
  const at_shape *s = &d->shape;
  at_tensors t;
  memset(&t, 0, sizeof t);
  t.q = (const void *)(uintptr_t)d->q[set];
  t.k = (const void *)(uintptr_t)d->k[set];
  t.v = (const void *)(uintptr_t)d->v[set];
  t.o = (void *)(uintptr_t)d->o;
  t.lse = s->with_lse ? (float *)(uintptr_t)d->lse : NULL;
  t.q_stride = t.o_stride = at_strides_bshd(s->q_len, s->q_heads, s->head_dim);
  t.k_stride = t.v_stride = at_strides_bshd(s->kv_len, s->kv_heads, s->head_dim);
  return t;
}

static at_status launch_impl(void *user, int set, CUstream stream)
{
  bench_impl *impl = user;
  bench_data *d = impl->data;
  at_tensors t = tensors_for(d, set);
  at_status rc;
  switch (impl->kind) {
  case IMPL_NAIVE: return rt_naive_run(&impl->naive, &d->shape, &t, d->scratch, stream);
  case IMPL_CUDNN:
    rt_cudnn_sdpa_set_path(d->cudnn, impl->path);
    if ((rc = rt_cudnn_sdpa_bind(d->cudnn, &d->shape, &t, NULL)) != AT_OK) return rc;
    return rt_cudnn_sdpa_launch(d->cudnn, stream);
  case IMPL_FA2: return gen_launch(&impl->variant, impl->fn, &d->shape, &t, stream);
  }
  return rt_fail(AT_ERR_INVALID, "unknown implementation kind");
}

/* ---- inputs and the reference --------------------------------------------------------------- */

static at_status upload_random(tn_rng *rng, at_dtype dtype, size_t n, float *staging, void *packed,
                               CUdeviceptr *out)
{
  at_status rc;
  tn_rng_fill(rng, staging, n, -1.0f, 1.0f);
  if ((rc = tn_pack(dtype, staging, n, packed)) != AT_OK) return rc;
  if ((rc = rt_alloc(out, n * at_dtype_size(dtype))) != AT_OK) return rc;
  return rt_upload(*out, packed, n * at_dtype_size(dtype));
}

static at_status make_inputs(bench_data *d, unsigned long long seed)
{
  const at_shape *s = &d->shape;
  size_t esz = at_dtype_size(s->dtype);
  d->n_q = (size_t)s->batch * s->q_len * s->q_heads * s->head_dim;
  d->n_kv = (size_t)s->batch * s->kv_len * s->kv_heads * s->head_dim;
  d->n_lse = (size_t)s->batch * s->q_heads * s->q_len;
  d->n_sets = tn_rotation_sets((d->n_q + 2 * d->n_kv) * esz, (size_t)d->ctx.info.l2_bytes, MAX_SETS);
  size_t n_max = d->n_q > d->n_kv ? d->n_q : d->n_kv;
  float *staging = malloc(n_max * sizeof(float));
  void *packed = malloc(n_max * esz);
  tn_rng rng = tn_rng_seeded(seed);
  at_status rc = AT_OK;
  if (!staging || !packed) rc = rt_fail(AT_ERR_NOMEM, "no host memory for %zu inputs", n_max);
  for (int i = 0; i < d->n_sets && rc == AT_OK; i++) {
    if ((rc = upload_random(&rng, s->dtype, d->n_q, staging, packed, &d->q[i])) != AT_OK) break;
    if ((rc = upload_random(&rng, s->dtype, d->n_kv, staging, packed, &d->k[i])) != AT_OK) break;
    rc = upload_random(&rng, s->dtype, d->n_kv, staging, packed, &d->v[i]);
  }
  free(staging);
  free(packed);
  if (rc != AT_OK) return rc;
  if ((rc = rt_alloc(&d->o, d->n_q * 4)) != AT_OK) return rc; /* room for an f32 output */
  if ((rc = rt_alloc(&d->lse, d->n_lse * sizeof(float))) != AT_OK) return rc;
  d->got = malloc(d->n_q * sizeof(float));
  if (!d->got) return rt_fail(AT_ERR_NOMEM, "no host memory for %zu outputs", d->n_q);
  return AT_OK;
}

static at_status ensure_scratch(bench_data *d)
{
  if (d->scratch) return AT_OK;
  at_status rc = rt_alloc(&d->scratch, rt_naive_scratch_bytes(&d->shape));
  if (rc != AT_OK) return rt_fail_context(rc, "the naive path's score matrix");
  return AT_OK;
}

static at_status to_double(const float *x, size_t n, double **out)
{
  *out = malloc(n * sizeof(double));
  if (!*out) return rt_fail(AT_ERR_NOMEM, "no host memory for %zu reference values", n);
  for (size_t i = 0; i < n; i++) (*out)[i] = x[i];
  return AT_OK;
}

/* The naive kernels with fp32 output on set 0: the yardstick for every implementation. */
static at_status make_reference(bench_data *d)
{
  rt_naive ref;
  at_status rc;
  at_tensors t = tensors_for(d, 0);
  at_shape s = d->shape;
  s.with_lse = 1;
  t.lse = (float *)(uintptr_t)d->lse;
  if ((rc = ensure_scratch(d)) != AT_OK) return rc;
  if ((rc = rt_naive_create(d->ctx.arch, s.dtype, AT_DTYPE_F32, &ref)) != AT_OK) return rc;
  rc = rt_naive_run(&ref, &s, &t, d->scratch, NULL);
  if (rc == AT_OK) rc = rt_ctx_sync(&d->ctx);
  rt_naive_destroy(&ref);
  if (rc != AT_OK) return rc;
  if ((rc = rt_download(d->got, d->o, d->n_q * sizeof(float))) != AT_OK) return rc;
  if ((rc = to_double(d->got, d->n_q, &d->ref_o)) != AT_OK) return rc;
  if ((rc = rt_download(d->got, d->lse, d->n_lse * sizeof(float))) != AT_OK) return rc;
  return to_double(d->got, d->n_lse, &d->ref_lse);
}

/* One launch on set 0 with O and LSE poisoned; the relative L2 error of O (and of LSE when the
 * shape has it: the larger of the two). */
static at_status verify_impl(bench_impl *impl, double *err)
{
  bench_data *d = impl->data;
  at_status rc;
  if ((rc = rt_fill_u8(d->o, 0xFF, d->n_q * 4)) != AT_OK) return rc;
  if ((rc = rt_fill_u8(d->lse, 0xFF, d->n_lse * sizeof(float))) != AT_OK) return rc;
  if ((rc = launch_impl(impl, 0, NULL)) != AT_OK) return rc;
  if ((rc = rt_ctx_sync(&d->ctx)) != AT_OK) return rc;
  size_t bytes = d->n_q * at_dtype_size(d->shape.dtype);
  void *packed = malloc(bytes);
  if (!packed) return rt_fail(AT_ERR_NOMEM, "no host memory for the output");
  rc = rt_download(packed, d->o, bytes);
  if (rc == AT_OK) rc = tn_unpack(d->shape.dtype, packed, d->n_q, d->got);
  free(packed);
  if (rc != AT_OK) return rc;
  *err = tn_compare(d->ref_o, d->got, d->n_q).rel_l2;
  if (d->shape.with_lse) {
    if ((rc = rt_download(d->got, d->lse, d->n_lse * sizeof(float))) != AT_OK) return rc;
    double e = tn_compare_lse(d->ref_lse, d->got, d->n_lse).rel_l2;
    if (!(e <= *err)) *err = e;
  }
  return AT_OK;
}

/* ---- implementations ----------------------------------------------------------------------- */

static void print_header(void)
{
  printf("%-44s %10s %9s %9s  %s\n", "impl", "time_ms", "TFLOP/s", "rel_err", "note");
}

static void print_row(const bench_data *d, const char *name, const tn_timing *tm, double err,
                      const char *note)
{
  double tflops = at_shape_flops(&d->shape) / (tm->median_ms * 1e-3) / 1e12;
  char errtext[32];
  if (isnan(err)) snprintf(errtext, sizeof errtext, "-");
  else snprintf(errtext, sizeof errtext, "%.2e", err);
  printf("%-44s %10.4f %9.1f %9s  %s\n", name, tm->median_ms, tflops, errtext, note);
  fflush(stdout);
}

static void print_failure(const char *name, const char *status, const char *why)
{
  printf("%-44s %10s %9s %9s  %s: %.160s\n", name, "-", "-", "-", status, why);
  fflush(stdout);
}

/* Verify, then time; prints one row. Returns AT_OK if it printed a timing (time in *ms). */
static at_status measure(bench_impl *impl, const bench_opts *o, const char *note, double *ms)
{
  bench_data *d = impl->data;
  double err = NAN, tol = d->shape.dtype == AT_DTYPE_F32 ? 1e-4 : 1e-2;
  tn_timing tm;
  at_status rc;
  if (o->verify) {
    if ((rc = verify_impl(impl, &err)) != AT_OK) {
      print_failure(impl->name, rc == AT_ERR_UNSUPPORTED ? "unsupported" : "failed", at_last_error());
      return rc;
    }
    if (!(err <= tol)) {
      char why[64];
      snprintf(why, sizeof why, "rel_err %.3g over tolerance %.0e", err, tol);
      print_failure(impl->name, "WRONG", why);
      return AT_ERR_MISMATCH;
    }
  }
  if ((rc = tn_time_launches(launch_impl, impl, d->n_sets, &o->timing, NULL, &tm)) != AT_OK) {
    print_failure(impl->name, "failed", at_last_error());
    return rc;
  }
  print_row(d, impl->name, &tm, err, note);
  *ms = tm.median_ms;
  return AT_OK;
}

static at_status load_variant(bench_impl *impl, const rt_binary *bin)
{
  char entry[GEN_KEY_MAX];
  at_status rc = gen_entry_name(&impl->variant, entry, sizeof entry);
  if (rc == AT_OK) rc = rt_module_load(bin->cubin, &impl->module);
  if (rc == AT_OK) rc = rt_module_function(impl->module, entry, &impl->fn);
  return rc;
}

/* Compile (in parallel) and measure a list of variants; mark the fastest. */
static int bench_variants(bench_data *d, const bench_opts *o, const gen_variant *vs, int n)
{
  gen_target target;
  gen_compiled *compiled = calloc((size_t)n, sizeof *compiled);
  int best = -1, failures = 0;
  double best_ms = INFINITY;
  char best_key[GEN_KEY_MAX] = "";
  at_status rc;
  if (!compiled) return rt_fail(AT_ERR_NOMEM, "no memory"), 1;
  if ((rc = gen_target_make(d->ctx.arch, d->ctx.info.smem_per_block_optin, &target)) != AT_OK ||
      (rc = gen_compile_all(vs, n, &target, 0, compiled)) != AT_OK) {
    print_failure("fa2", "failed", at_last_error());
    free(compiled);
    return 1;
  }
  for (int i = 0; i < n; i++) {
    bench_impl impl = {.kind = IMPL_FA2, .data = d, .variant = vs[i]};
    double ms;
    snprintf(impl.name, sizeof impl.name, "%s", compiled[i].key);
    if (compiled[i].status != AT_OK) {
      print_failure(impl.name, "compile failed", compiled[i].message);
      failures++;
      continue;
    }
    char note[96];
    const rt_kernel_resources *r = &compiled[i].resources;
    snprintf(note, sizeof note, "%d regs, %d B spill, %d B smem", r->registers, r->spill_store_bytes,
             gen_smem_bytes(&vs[i]));
    if ((rc = load_variant(&impl, &compiled[i].binary)) != AT_OK) {
      print_failure(impl.name, "load failed", at_last_error());
      failures++;
    } else if (measure(&impl, o, note, &ms) == AT_OK) {
      if (ms < best_ms) best_ms = ms, best = i, snprintf(best_key, sizeof best_key, "%s", impl.name);
    } else {
      failures++;
    }
    rt_module_unload(impl.module);
  }
  if (n > 1 && best >= 0) {
    tn_timing tm = {.median_ms = best_ms};
    char name[GEN_KEY_MAX + 2];
    snprintf(name, sizeof name, "* %s", best_key);
    print_row(d, name, &tm, NAN, "fastest fa2 variant");
  }
  gen_compiled_free(compiled, n);
  free(compiled);
  return failures;
}

static int bench_one(bench_data *d, const bench_opts *o, const char *name)
{
  bench_impl impl = {.data = d};
  double ms;
  at_status rc;
  snprintf(impl.name, sizeof impl.name, "%s", name);
  if (strcmp(name, "naive") == 0) {
    impl.kind = IMPL_NAIVE;
    if ((rc = ensure_scratch(d)) != AT_OK ||
        (rc = rt_naive_create(d->ctx.arch, d->shape.dtype, d->shape.dtype, &impl.naive)) != AT_OK) {
      print_failure(name, "failed", at_last_error());
      return 1;
    }
    rc = measure(&impl, o, "scores, softmax, PV: 3 kernels", &ms);
    rt_naive_destroy(&impl.naive);
    return rc != AT_OK;
  }
  if (strcmp(name, "cudnn") == 0 || strcmp(name, "cudnn-unified") == 0) {
    impl.kind = IMPL_CUDNN;
    impl.path = name[5] ? RT_CUDNN_PATH_UNIFIED : RT_CUDNN_PATH_COMPOSITE;
    if (!d->cudnn && (rc = rt_cudnn_sdpa_create(&d->ctx, &d->cudnn)) != AT_OK) {
      print_failure(name, "failed", at_last_error());
      return 1;
    }
    rt_cudnn_sdpa_set_path(d->cudnn, impl.path);
    at_tensors t = tensors_for(d, 0);
    rt_cudnn_plan_info info;
    if ((rc = rt_cudnn_sdpa_plan(d->cudnn, &d->shape, &t, NULL, &info)) != AT_OK) {
      print_failure(name, rc == AT_ERR_UNSUPPORTED ? "unsupported" : "failed", at_last_error());
      return rc != AT_ERR_UNSUPPORTED;
    }
    char note[256];
    rt_cudnn_plan_info_format(&info, note, sizeof note);
    return measure(&impl, o, note, &ms) != AT_OK;
  }
  gen_target target;
  if ((rc = gen_target_make(d->ctx.arch, d->ctx.info.smem_per_block_optin, &target)) != AT_OK) {
    print_failure(name, "failed", at_last_error());
    return 1;
  }
  if (strcmp(name, "fa2") == 0) {
    gen_variant vs[GEN_MAX_VARIANTS];
    int n = 0;
    if ((rc = gen_enumerate(&d->shape, &target, vs, GEN_MAX_VARIANTS, &n)) != AT_OK) {
      print_failure(name, "unsupported", at_last_error());
      return 1;
    }
    return bench_variants(d, o, vs, n) != 0;
  }
  gen_variant v;
  if (strcmp(name, "fa2-default") == 0) rc = gen_default_variant(&d->shape, &target, &v);
  else rc = gen_variant_parse(name, &v);
  if (rc == AT_OK) rc = gen_variant_matches(&v, &d->shape);
  if (rc == AT_OK) rc = gen_variant_check(&v, &target);
  if (rc != AT_OK) {
    print_failure(name, "refused", at_last_error());
    return 1;
  }
  return bench_variants(d, o, &v, 1) != 0;
}

/* ---- options -------------------------------------------------------------------------------- */

static int parse_options(int argc, char **argv, bench_opts *o)
{
  enum { O_IMPL = 256, O_BATCH, O_SEQ, O_QLEN, O_KVLEN, O_QH, O_KVH, O_D, O_DTYPE, O_CAUSAL,
         O_CAUSAL_BR, O_LSE, O_SCALE, O_WARMUP, O_REPS, O_DEVICE, O_NOVERIFY, O_SEED, O_HELP };
  static const struct option options[] = {
      {"impl", required_argument, NULL, O_IMPL},       {"batch", required_argument, NULL, O_BATCH},
      {"seq-len", required_argument, NULL, O_SEQ},     {"q-len", required_argument, NULL, O_QLEN},
      {"kv-len", required_argument, NULL, O_KVLEN},    {"q-heads", required_argument, NULL, O_QH},
      {"kv-heads", required_argument, NULL, O_KVH},    {"head-dim", required_argument, NULL, O_D},
      {"dtype", required_argument, NULL, O_DTYPE},     {"causal", no_argument, NULL, O_CAUSAL},
      {"causal-br", no_argument, NULL, O_CAUSAL_BR},   {"lse", no_argument, NULL, O_LSE},
      {"scale", required_argument, NULL, O_SCALE},     {"warmup", required_argument, NULL, O_WARMUP},
      {"reps", required_argument, NULL, O_REPS},       {"device", required_argument, NULL, O_DEVICE},
      {"no-verify", no_argument, NULL, O_NOVERIFY},    {"seed", required_argument, NULL, O_SEED},
      {"help", no_argument, NULL, O_HELP},             {NULL, 0, NULL, 0}};
  const int big = 1 << 30;
  int kv_heads = 0, c;
  at_shape *s = &o->shape;
  *s = (at_shape){.batch = 2, .q_len = 1024, .kv_len = 1024, .q_heads = 16, .head_dim = 128,
                  .dtype = AT_DTYPE_BF16};
  snprintf(o->impls, sizeof o->impls, "naive,cudnn,fa2-default");
  o->timing = (tn_timing_opts){.warmup = 10, .reps = 50};
  o->verify = 1;
  o->seed = tn_fresh_seed();
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    const char *a = optarg;
    switch (c) {
    case O_IMPL: snprintf(o->impls, sizeof o->impls, "%s", a); break;
    case O_BATCH: if (!tn_parse_int("bench", "--batch", a, 1, big, &s->batch)) return -1; break;
    case O_SEQ:
      if (!tn_parse_int("bench", "--seq-len", a, 1, big, &s->q_len)) return -1;
      s->kv_len = s->q_len;
      break;
    case O_QLEN: if (!tn_parse_int("bench", "--q-len", a, 1, big, &s->q_len)) return -1; break;
    case O_KVLEN: if (!tn_parse_int("bench", "--kv-len", a, 1, big, &s->kv_len)) return -1; break;
    case O_QH: if (!tn_parse_int("bench", "--q-heads", a, 1, 65535, &s->q_heads)) return -1; break;
    case O_KVH: if (!tn_parse_int("bench", "--kv-heads", a, 1, 65535, &kv_heads)) return -1; break;
    case O_D: if (!tn_parse_int("bench", "--head-dim", a, 1, 512, &s->head_dim)) return -1; break;
    case O_DTYPE:
      if (at_dtype_parse(a, &s->dtype) != AT_OK) return tn_usage_error("bench", "%s", at_last_error()), -1;
      if (s->dtype != AT_DTYPE_F16 && s->dtype != AT_DTYPE_BF16)
        return tn_usage_error("bench", "--dtype %s: bench runs f16 and bf16 inputs", a), -1;
      break;
    case O_CAUSAL: s->mask = AT_MASK_CAUSAL_TL; break;
    case O_CAUSAL_BR: s->mask = AT_MASK_CAUSAL_BR; break;
    case O_LSE: s->with_lse = 1; break;
    case O_SCALE: {
      char *end;
      s->scale = strtof(a, &end);
      if (*end || !(s->scale > 0) || isinf(s->scale))
        return tn_usage_error("bench", "invalid value '%s' for --scale (expected a positive number)", a), -1;
      break;
    }
    case O_WARMUP: if (!tn_parse_int("bench", "--warmup", a, 0, 100000, &o->timing.warmup)) return -1; break;
    case O_REPS: if (!tn_parse_int("bench", "--reps", a, 1, 100000, &o->timing.reps)) return -1; break;
    case O_DEVICE: if (!tn_parse_int("bench", "--device", a, 0, 1023, &o->device)) return -1; break;
    case O_NOVERIFY: o->verify = 0; break;
    case O_SEED: o->seed = strtoull(a, NULL, 0); break;
    case O_HELP: fputs(USAGE, stdout); return 1;
    default:
      if (optopt) return tn_usage_error("bench", "option '%s' needs a value", argv[optind - 1]), -1;
      return tn_usage_error("bench", "unknown option '%s'", argv[optind - 1]), -1;
    }
  }
  if (optind < argc) return tn_usage_error("bench", "unexpected argument '%s'", argv[optind]), -1;
  s->kv_heads = kv_heads ? kv_heads : s->q_heads;
  if (at_shape_check(s) != AT_OK) return tn_usage_error("bench", "%s", at_last_error()), -1;
  return 0;
}

static void free_data(bench_data *d)
{
  for (int i = 0; i < d->n_sets; i++) rt_free(d->q[i]), rt_free(d->k[i]), rt_free(d->v[i]);
  rt_free(d->o), rt_free(d->lse), rt_free(d->scratch);
  if (d->cudnn) rt_cudnn_sdpa_destroy(d->cudnn);
  free(d->ref_o), free(d->ref_lse), free(d->got);
  if (d->ctx.context) rt_ctx_close(&d->ctx);
}

int tn_cmd_bench(int argc, char **argv)
{
  bench_opts o;
  memset(&o, 0, sizeof o);
  int parsed = parse_options(argc, argv, &o);
  if (parsed != 0) return parsed > 0 ? TN_EXIT_OK : TN_EXIT_USAGE;

  bench_data d;
  memset(&d, 0, sizeof d);
  d.shape = o.shape;
  at_status rc = rt_ctx_open(o.device, &d.ctx);
  if (rc != AT_OK) return tn_report_failure("bench", rc);
  const at_shape *s = &d.shape;
  printf("shape: B=%d T=%d S=%d Nq=%d Nkv=%d D=%d %s mask=%s%s  (%.3g GFLOP)\n", s->batch,
         s->q_len, s->kv_len, s->q_heads, s->kv_heads, s->head_dim, at_dtype_name(s->dtype),
         at_mask_name(s->mask), s->with_lse ? " lse" : "", at_shape_flops(s) / 1e9);
  if ((rc = make_inputs(&d, o.seed)) != AT_OK || (o.verify && (rc = make_reference(&d)) != AT_OK)) {
    free_data(&d);
    return tn_report_failure("bench", rc);
  }
  printf("device: %s (%s), %d input set%s, warm-up %d, median of %d, seed %llu\n", d.ctx.info.name,
         d.ctx.arch, d.n_sets, d.n_sets == 1 ? "" : "s", o.timing.warmup, o.timing.reps, o.seed);
  print_header();
  int failures = 0;
  char *list = strdup(o.impls), *save = NULL;
  for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save))
    failures += bench_one(&d, &o, name);
  free(list);
  free_data(&d);
  return failures ? TN_EXIT_RUNTIME : TN_EXIT_OK;
}
