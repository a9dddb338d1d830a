/*
 * cmd_bench.c — `attntune bench`: time implementations of one attention shape with the same
 * timing code (tuner/timing.c), after verifying each against the naive reference on the same
 * inputs. Implementations: naive (the three-kernel path, output in the input dtype), cudnn
 * (composite graph; FP8 graph with FP8 output for FP8 inputs), cudnn-unified (the single fused op), fused (every variant the generator lists,
 * every family; the fastest is marked), fa2, fa3 or decode (one family's), default (fa2-default),
 * or a variant key. f32 inputs run the naive kernels only:
 * every other implementation is refused on its own row (TN_F32_NO_FUSED, TN_F32_NO_CUDNN).
 * The list is checked before a GPU is opened: an unknown name, a malformed key, or decode for a
 * query longer than decode serves is a usage error.
 *
 * Decode shapes (tn_is_decode_shape: 1 <= T <= 16) are memory bound, so their rows give TB/s of
 * K/V read in place of TFLOP/s, and the header says so.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/api_internal.h"

#include "tuner/bench_serving.h"
#include "tuner/cli.h"
#include "tuner/commands.h"
#include "tuner/reference.h"
#include "tuner/harness.h"
#include "tuner/measure.h"
#include "tuner/tune.h"

static const char USAGE[] =
    "usage: attntune bench [--impl LIST] [shape options] [--warmup N] [--reps N] [--device N]\n"
    "                      [--no-verify] [--seed N] [--rounds N]\n"
    "       attntune bench --suite codelab|NAME|FILE.yaml [--db FILE] [--devices all|0,1] [--force]\n"
    "       attntune bench --overhead [shape options] [--device N]\n"
    "       attntune bench [--impl LIST] --lengths L1,L2,...|uniform:MIN:MAX[:SEED] [--page-size N]\n"
    "                      [shape options] [timing options]\n"
    "\n"
    "--overhead measures the library's costs for the shape: creating a plan that compiles, creating\n"
    "it again from the cached cubin (a new context), and the host time of at_plan_run against a raw\n"
    "cuLaunchKernel of the same kernel with the same arguments.\n"
    "\n"
    "--suite runs a whole set of experiments and stores them in the cache for 'attntune report':\n"
    "every shape of the suite's config is tuned as 'attntune tune' does, with the naive path timed\n"
    "as well (naive vs fused vs cuDNN). 'codelab' is configs/codelab.yaml: the codelab's shape,\n"
    "sequence and batch sweeps, causal or not, MHA/GQA/MQA, FP8, and the codelab's shape in fp32\n"
    "(the naive kernels only). Suites are looked up in $ATTNTUNE_CONFIGS, ./configs and the\n"
    "installed share/attntune/configs.\n"
    "\n"
    "Times attention implementations on one shape by CUDA-graph replay (warm-up, then the median\n"
    "over replays of a graph of up to 20 captured launches, inputs rotated so together they exceed\n"
    "twice the L2), after checking each output against the naive fp32 reference on the same random\n"
    "inputs. Every implementation is timed the same way.\n"
    "\n"
    "  --impl LIST        comma-separated, in order (default naive,cudnn,default; naive for f32):\n"
    "                       naive          the three-kernel reference path (output in the dtype)\n"
    "                       cudnn          cuDNN's fused attention, composite graph; for e4m3/e5m2\n"
    "                                      its FP8 graph, which writes FP8 output (decoded to verify)\n"
    "                       cudnn-unified  cuDNN's single SDPA op (no masks; cuDNN >= 9.13.1)\n"
    "                       fused          every generated variant listed for the shape (fa2; fa3 on\n"
    "                                      sm_90a; decode for T <= 16); * marks the best\n"
    "                       fa2, fa3       the same, one family only\n"
    "                       decode         the same, the split-KV decode family only (T <= 16)\n"
    "                       default        the variant used when nothing is tuned (fa2-default:\n"
    "                                      the same, its older name)\n"
    "                       KEY            one variant, e.g. fa2.bf16.d128.none.g1.bm128.bn64.w4.s2\n"
    "                                      or decode.bf16.d128.causal-br.g4.bm16.bn64.w4.s4.sp4\n"
    "shape:\n"
    "  --batch N          B (default 2)\n"
    "  --seq-len N        T and S together (default 1024)\n"
    "  --q-len N          T, queries\n"
    "  --kv-len N         S, keys and values\n"
    "  --q-heads N        Nq (default 16)\n"
    "  --kv-heads N       Nkv, divides Nq (default Nq)\n"
    "  --head-dim N       D (default 128)\n"
    "  --dtype T          f32, f16, bf16, e4m3 or e5m2 (default bf16); FP8 inputs are random values\n"
    "                     in [-1, 1) rounded to the format, unit descales, bf16 output (cuDNN:\n"
    "                     FP8 output scaled by the format's largest value); f32\n"
    "                     runs only the naive kernels (attntune has no fused f32 kernel and\n"
    "                     cuDNN no fp32 attention)\n"
    "  --kv-dtype T       K and V: e4m3 or e5m2 with f16/bf16 --dtype, an FP8 KV cache (random\n"
    "                     values rounded to the format, unit descales, output in the dtype; the\n"
    "                     decode family for T <= 16, no cuDNN baseline); default: the dtype\n"
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
    "  --rounds N         time the --impl list N times (1..100, default 1), its order reversed every\n"
    "                     second round, then print each implementation's median over the rounds\n"
    "                     with its fastest and slowest reading; verified in the first round only.\n"
    "                     Under a power cap a long call's reading moves with its place in the run\n"
    "                     (several percent at 1 ms); rounds in both orders give every implementation\n"
    "                     the same share of early and late places. A family or 'fused' is compiled\n"
    "                     again each round.\n"
    "\n"
    "serving layouts (padded Q of 1..16 tokens with --page-size runs the decode family's paged\n"
    "variants, longer padded Q with --page-size the paged prefill variants of fa3 (sm_90a) and fa2,\n"
    "ragged Q with ragged K/V (--lengths without --q-len) the ragged fa3/fa2 variants (.rg) and\n"
    "cuDNN's ragged graph (--impl cudnn, f16/bf16; with padded Q and --page-size its paged graph),\n"
    "ragged Q with --page-size their .pg<N>.rgq\n"
    "variants; everything else only the naive kernels: every other --impl gets a row that says why\n"
    "it was refused; a generated kernel's output is checked against the naive kernels' before it\n"
    "is timed):\n"
    "  --lengths SPEC     a ragged batch: the sequences' lengths as a list (it sets B) or drawn\n"
    "                     uniformly from MIN..MAX for --batch sequences (seed 1 unless given). They are\n"
    "                     the K/V lengths, packed (cu_seqlens); without --q-len the queries are ragged\n"
    "                     with the same lengths (prefill), with --q-len every sequence has that many\n"
    "                     query rows (decode, chunks). Not with --kv-len or --seq-len.\n"
    "  --page-size N      K/V in a pool of pages of N tokens (1, 16, 32, 64, 128, 256) with a block\n"
    "                     table (pages handed out shuffled); the lengths are --lengths or --kv-len\n"
    "  --impl seqsum      the padding-free ideal: each sequence alone through an ordinary plan on\n"
    "                     contiguous tensors, the times summed (default: naive,cudnn,default,seqsum)\n"
    "  --impl decode      with --page-size and --q-len 1..16: every paged decode variant, verified\n"
    "                     against the naive kernels, then timed (KV TB/s of the sequences' lengths)\n"
    "  --impl fa2|fa3|fused  with a ragged or paged prefill batch: every ragged (paged) variant of\n"
    "                     fa2, fa3 or both, verified and timed (TFLOP/s of each sequence's visible\n"
    "                     pairs); with seqsum in the list a last line compares the best with it:\n"
    "                     bench --lengths uniform:512:8192 --batch 16 --causal --impl seqsum,fa2,default\n"
    "  --impl cudnn       with a ragged batch: cuDNN's ragged (varlen) graph; with paged K/V and\n"
    "                     padded Q: cuDNN's paged graph (paged cache loads); either verified like the\n"
    "                     rest and timed with its metadata kernels; with a ragged or paged variant in\n"
    "                     the list a last line compares the best with it:\n"
    "                     bench --lengths uniform:512:8192 --batch 16 --causal --impl cudnn,seqsum,default\n"
    "  --impl contiguous  with --page-size and padded Q: every contiguous variant of the family the\n"
    "                     paged batch runs (decode, or fa2 above 16 query rows) on the same shape\n"
    "                     (dense [B, S, Nkv, D]); with decode (fa2) in the same list a last line\n"
    "                     compares the best of each:\n"
    "                     bench --page-size 16 --q-len 1 --kv-len 16384 --impl decode,contiguous\n"
    "                     bench --page-size 16 --q-len 2048 --kv-len 8192 --causal-br --impl fa2,contiguous\n"
    "\n"
    "TFLOP/s = 4*B*Nq*T*S*D / time, halved for causal with T = S (docs/design.md). Decode shapes\n"
    "(1 <= T <= 16) are memory bound: their rows give KV TB/s = 2*B*Nkv*S*D*sizeof(K/V dtype) / time\n"
    "(1 byte per element for an FP8 KV cache), the K/V bytes read per second, in place of TFLOP/s.\n";

enum { BENCH_MAX_ROUNDS = 100, BENCH_MAX_READ = 256 };

/* Every timing of a --rounds run, by implementation name, in the order first run. */
typedef struct bench_readings {
  int n;
  struct {
    char name[GEN_KEY_MAX];
    int failed; /* a check or a timing failed: not run again */
    int count;
    float ms[BENCH_MAX_ROUNDS];
  } impl[BENCH_MAX_READ];
} bench_readings;

typedef struct bench_opts {
  at_shape shape;
  char impls[2048];
  rt_timing_opts timing;
  int device;
  int verify;
  int rounds;
  bench_readings *readings; /* --rounds > 1: where measure() adds each time */
  int overhead;
  unsigned long long seed;
  const char *lengths; /* --lengths, or NULL */
  int page_size;       /* --page-size, or 0 */
  int impl_given, q_len_given, kv_len_given;
} bench_opts;

/* ---- implementations ----------------------------------------------------------------------- */

/* The rate column: TFLOP/s, or for a decode shape TB/s of K/V read (see the header comment). */
static void print_header(const at_shape *s)
{
  printf("%-44s %10s %9s %9s  %s\n", "impl", "time_ms", tn_is_decode_shape(s) ? "KV TB/s" : "TFLOP/s", "rel_err",
         "note");
}

static void print_row(const at_shape *s, const char *name, double ms, double err, const char *note)
{
  char errtext[32];
  if (isnan(err)) snprintf(errtext, sizeof errtext, "-");
  else snprintf(errtext, sizeof errtext, "%.2e", err);
  if (tn_is_decode_shape(s))
    printf("%-44s %10.4f %9.2f %9s  %s\n", name, ms, tn_kv_tbs(s, ms), errtext, note);
  else
    printf("%-44s %10.4f %9.1f %9s  %s\n", name, ms, at_shape_flops(s) / (ms * 1e-3) / 1e12, errtext, note);
  fflush(stdout);
}

static void print_failure(const char *name, const char *status, const char *why)
{
  printf("%-44s %10s %9s %9s  %s: %.160s\n", name, "-", "-", "-", status, why);
  fflush(stdout);
}

/* name's entry in a --rounds run's table (added where new); NULL outside a --rounds run, or past
 * the table's room, which is said once. */
static int find_reading(const bench_readings *r, const char *name)
{
  int i = 0;
  while (r && i < r->n && strcmp(r->impl[i].name, name) != 0) i++;
  return r && i < r->n ? i : -1;
}

static int reading_of(bench_readings *r, const char *name)
{
  int i = find_reading(r, name);
  if (!r || i >= 0) return i;
  if (r->n == BENCH_MAX_READ) {
    fprintf(stderr, "attntune bench: more than %d implementations; %s left out of the rounds' medians\n",
            BENCH_MAX_READ, name);
    return -1;
  }
  i = r->n++;
  snprintf(r->impl[i].name, sizeof r->impl[i].name, "%s", name);
  return i;
}

static int failed_earlier(const bench_readings *r, const char *name)
{
  int i = find_reading(r, name);
  return i >= 0 && r->impl[i].failed;
}

static at_status note_failure(const bench_opts *o, const char *name, at_status rc)
{
  int i = reading_of(o->readings, name);
  if (i >= 0) o->readings->impl[i].failed = 1;
  return rc;
}

/* Verify, then time; prints one row. Returns AT_OK if it printed a timing (time in *ms). In a
 * --rounds run an implementation that failed once is not run again: later rounds do not verify. */
static at_status measure(tn_harness *h, tn_impl *impl, const bench_opts *o, const char *note,
                         double *ms)
{
  double err = NAN, err_cudnn = NAN, tol = at_dtype_tolerance(h->shape.dtype);
  rt_timing tm;
  at_status rc;
  if (failed_earlier(o->readings, impl->name)) {
    print_failure(impl->name, "skipped", "failed in an earlier round");
    return AT_ERR_MISMATCH;
  }
  if (o->verify) {
    if ((rc = tn_harness_verify(h, impl, &err, &err_cudnn)) != AT_OK) {
      print_failure(impl->name, rc == AT_ERR_UNSUPPORTED ? "unsupported" : "failed", at_last_error());
      return note_failure(o, impl->name, rc);
    }
    if (!(err <= tol)) {
      char why[64];
      snprintf(why, sizeof why, "rel_err %.3g over tolerance %.0e", err, tol);
      print_failure(impl->name, "WRONG", why);
      return note_failure(o, impl->name, AT_ERR_MISMATCH);
    }
  }
  if ((rc = tn_harness_time(h, impl, &o->timing, &tm)) != AT_OK) {
    print_failure(impl->name, "failed", at_last_error());
    return note_failure(o, impl->name, rc);
  }
  print_row(&h->shape, impl->name, tm.median_ms, err, note);
  *ms = tm.median_ms;
  int i = reading_of(o->readings, impl->name);
  if (i >= 0 && o->readings->impl[i].count < BENCH_MAX_ROUNDS)
    o->readings->impl[i].ms[o->readings->impl[i].count++] = (float)tm.median_ms;
  return AT_OK;
}

/* Compile (in parallel) and measure a list of variants; mark the fastest. label names the list
 * in messages ("fused", a family name, or the key of a single variant). */
static int bench_variants(tn_harness *h, const bench_opts *o, const gen_variant *vs, int n, const char *label)
{
  gen_target target;
  rt_compiled *compiled = calloc((size_t)n, sizeof *compiled);
  int failures = 0;
  double best_ms = INFINITY;
  char best_key[GEN_KEY_MAX] = "";
  at_status rc;
  if (!compiled) return at_fail(AT_ERR_NOMEM, "no memory"), 1;
  if ((rc = gen_target_make(h->ctx->arch, h->ctx->info.smem_per_block_optin, &target)) != AT_OK ||
      (rc = rt_compile_all(vs, n, &target, 0, compiled)) != AT_OK) {
    print_failure(label, "failed", at_last_error());
    free(compiled);
    return 1;
  }
  for (int i = 0; i < n; i++) {
    tn_impl impl;
    double ms;
    if (compiled[i].status != AT_OK) {
      print_failure(compiled[i].key, "compile failed", compiled[i].message);
      failures++;
      continue;
    }
    char note[128];
    const rt_kernel_resources *r = &compiled[i].resources;
    snprintf(note, sizeof note, "%d regs, %d B spill, %d B smem%s", r->registers, r->spill_store_bytes,
             gen_smem_bytes(&vs[i]), r->wgmma_serialized ? ", wgmmas serialized (ptxas)" : "");
    if ((rc = tn_impl_variant(h, &vs[i], compiled[i].binary.cubin, &impl)) != AT_OK) {
      print_failure(compiled[i].key, "load failed", at_last_error());
      failures++;
    } else if (measure(h, &impl, o, note, &ms) == AT_OK) {
      if (ms < best_ms) best_ms = ms, snprintf(best_key, sizeof best_key, "%s", impl.name);
    } else {
      failures++;
    }
    tn_impl_close(&impl);
  }
  if (n > 1 && isfinite(best_ms)) {
    char name[GEN_KEY_MAX + 2], note[64];
    snprintf(name, sizeof name, "* %s", best_key);
    if (strcmp(label, "fused") == 0) snprintf(note, sizeof note, "fastest variant");
    else snprintf(note, sizeof note, "fastest %s variant", label);
    print_row(&h->shape, name, best_ms, NAN, note);
  }
  rt_compiled_free(compiled, n);
  free(compiled);
  return failures;
}

/* Why a family listed no variant for a shape that passed check_impls. */
static const char *why_family_lists_none(gen_family family)
{
  switch (family) {
  case GEN_FAMILY_FA3: return "fa3 lists variants on sm_90a only, for head dims 64, 128, 256";
  case GEN_FAMILY_DECODE:
    return "decode lists variants for f16 and bf16 (K/V the same or e4m3/e5m2), head dims that are multiples of "
           "16 in 32..256, GQA groups of up to 64 heads, on sm_80 and newer";
  default: return "no fa2 variant for this shape on this GPU";
  }
}

static int bench_one(tn_harness *h, const bench_opts *o, const char *name)
{
  tn_impl impl;
  double ms;
  at_status rc;
  if (strcmp(name, "naive") == 0) {
    if ((rc = tn_impl_naive(h, &impl)) != AT_OK) {
      print_failure(name, "failed", at_last_error());
      return 1;
    }
    rc = measure(h, &impl, o, h->shape.dtype == AT_DTYPE_F32 ? "scores, softmax, PV: 3 kernels (f32: the reference)"
                                                             : "scores, softmax, PV: 3 kernels", &ms);
    tn_impl_close(&impl);
    return rc != AT_OK;
  }
  if (strcmp(name, "cudnn") == 0 || strcmp(name, "cudnn-unified") == 0) {
    rt_cudnn_plan_info info;
    rt_cudnn_path path = name[5] ? RT_CUDNN_PATH_UNIFIED : RT_CUDNN_PATH_COMPOSITE;
    if ((rc = tn_impl_cudnn(h, path, &impl, &info)) != AT_OK) {
      print_failure(name, rc == AT_ERR_UNSUPPORTED ? "unsupported" : "failed", at_last_error());
      return rc != AT_ERR_UNSUPPORTED;
    }
    char note[320];
    rt_cudnn_plan_info_format(&info, note, sizeof note);
    if (at_dtype_is_fp8(h->shape.dtype)) { /* its error includes its FP8 output's rounding */
      size_t used = strlen(note);
      snprintf(note + used, sizeof note - used, "; writes %s output", at_dtype_name(impl.out_dtype));
    }
    return measure(h, &impl, o, note, &ms) != AT_OK;
  }
  if (h->shape.dtype == AT_DTYPE_F32) { /* fused, fa2, fa3, default or a variant key */
    print_failure(name, "unsupported", TN_F32_NO_FUSED "; f32 runs --impl naive");
    return 1;
  }
  gen_target target;
  if ((rc = gen_target_make(h->ctx->arch, h->ctx->info.smem_per_block_optin, &target)) != AT_OK) {
    print_failure(name, "failed", at_last_error());
    return 1;
  }
  const int fused = strcmp(name, "fused") == 0, family = gen_family_of_name(name, strlen(name));
  if (fused || family >= 0) {
    gen_variant vs[GEN_MAX_VARIANTS];
    int n = 0, kept = 0;
    if ((rc = gen_enumerate(&h->shape, &target, vs, GEN_MAX_VARIANTS, &n)) != AT_OK) {
      print_failure(name, "unsupported", at_last_error());
      return 1;
    }
    for (int i = 0; i < n; i++)
      if (fused || (int)vs[i].family == family) vs[kept++] = vs[i];
    if (kept == 0) {
      print_failure(name, "unsupported", fused ? "no generated variant for this shape on this GPU"
                                               : why_family_lists_none((gen_family)family));
      return 1;
    }
    return bench_variants(h, o, vs, kept, name) != 0;
  }
  gen_variant v;
  if (strcmp(name, "default") == 0 || strcmp(name, "fa2-default") == 0)
    rc = gen_default_variant(&h->shape, &target, &v);
  else rc = gen_variant_parse(name, &v);
  if (rc == AT_OK) rc = gen_variant_matches(&v, &h->shape);
  if (rc == AT_OK) rc = gen_variant_check(&v, &target);
  if (rc != AT_OK) {
    print_failure(name, "refused", at_last_error());
    return 1;
  }
  return bench_variants(h, o, &v, 1, name) != 0;
}

/* ---- options -------------------------------------------------------------------------------- */

/* One --impl name, before any GPU work: a known name or a well-formed variant key, and decode
 * (the family or one of its keys) only for the queries it serves. 0 and a usage error if not. */
static int check_impl(const char *name, const at_shape *s)
{
  static const char *const NAMES[] = {"naive", "cudnn", "cudnn-unified", "fused", "default", "fa2-default"};
  gen_variant v;
  int decode = strcmp(name, "decode") == 0;
  int known = decode || gen_family_of_name(name, strlen(name)) >= 0;
  for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES && !known; i++) known = strcmp(name, NAMES[i]) == 0;
  if (!known && !gen_is_variant_key(name)) {
    tn_usage_error("bench", "unknown implementation '%s' in --impl (expected naive, cudnn, cudnn-unified, "
                   "fused, fa2, fa3, decode, default or a variant key)", name);
    return 0;
  }
  if (!known) {
    if (gen_variant_parse(name, &v) != AT_OK) {
      tn_usage_error("bench", "--impl %s: %s", name, at_last_error());
      return 0;
    }
    decode = v.family == GEN_FAMILY_DECODE;
  }
  if (decode && !tn_is_decode_shape(s)) {
    tn_usage_error("bench", "--impl %s: the decode family runs queries of 1 to %d tokens, not T = %d (give "
                   "--q-len 1..%d and --kv-len)", name, TN_DECODE_MAX_T, s->q_len, TN_DECODE_MAX_T);
    return 0;
  }
  return 1;
}

/* Every name of the comma-separated list (empty names are skipped, as the run skips them). */
static int check_impls(const char *list, const at_shape *s)
{
  char *copy = strdup(list), *save = NULL;
  int ok = copy != NULL;
  if (!copy) tn_usage_error("bench", "out of memory reading --impl");
  for (char *name = ok ? strtok_r(copy, ",", &save) : NULL; name && ok; name = strtok_r(NULL, ",", &save))
    ok = check_impl(name, s);
  free(copy);
  return ok;
}

/* --lengths / --page-size: what goes with them. The layout itself is checked when it is built
 * (tn_serving_bench_setup); implementation names only for being names, since the library's
 * refusal of each is the row it gets. */
static int check_serving_options(bench_opts *o)
{
  if (o->lengths && o->kv_len_given)
    return tn_usage_error("bench", "give the K/V lengths either by --lengths or by --kv-len/--seq-len, not both"), -1;
  if (o->overhead) return tn_usage_error("bench", "--overhead measures padded plans, not --lengths/--page-size"), -1;
  if (!o->impl_given) snprintf(o->impls, sizeof o->impls, "naive,cudnn,default,seqsum");
  static const char *const NAMES[] = {"naive", "cudnn", "cudnn-unified", "fused", "fa2", "fa3", "decode",
                                      "default", "fa2-default", "seqsum", "contiguous"};
  char *copy = strdup(o->impls), *save = NULL;
  int ok = copy != NULL;
  for (char *name = ok ? strtok_r(copy, ",", &save) : NULL; name && ok; name = strtok_r(NULL, ",", &save)) {
    int known = gen_is_variant_key(name);
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES && !known; i++) known = strcmp(name, NAMES[i]) == 0;
    if (!known)
      ok = 0, tn_usage_error("bench", "unknown implementation '%s' in --impl (expected naive, cudnn, "
                             "cudnn-unified, fused, fa2, fa3, decode, default, seqsum, contiguous or a variant key)", name);
  }
  free(copy);
  return ok ? 0 : -1;
}

/* bench --lengths / --page-size: the serving path (tuner/bench_serving.c). */
static int run_serving(const bench_opts *o)
{
  tn_serving_bench *b = malloc(sizeof *b); /* two length arrays: too big for the stack */
  if (!b) return fprintf(stderr, "attntune bench: out of memory\n"), TN_EXIT_RUNTIME;
  int code = TN_EXIT_USAGE;
  if (tn_serving_bench_setup(o->lengths, o->page_size, o->q_len_given, &o->shape, b)) {
    snprintf(b->impls, sizeof b->impls, "%s", o->impls);
    b->warmup = o->timing.warmup, b->reps = o->timing.reps, b->device = o->device, b->seed = o->seed;
    code = tn_serving_bench_run(b);
  }
  free(b);
  return code;
}

static int parse_options(int argc, char **argv, bench_opts *o)
{
  enum { O_IMPL = 256, O_BATCH, O_SEQ, O_QLEN, O_KVLEN, O_QH, O_KVH, O_D, O_DTYPE, O_KV_DTYPE, O_CAUSAL,
         O_CAUSAL_BR, O_LSE, O_SCALE, O_WARMUP, O_REPS, O_DEVICE, O_NOVERIFY, O_SEED, O_OVERHEAD, O_LENGTHS,
         O_PAGE_SIZE, O_ROUNDS, O_HELP };
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
      {"overhead", no_argument, NULL, O_OVERHEAD},     {"help", no_argument, NULL, O_HELP},
      {"kv-dtype", required_argument, NULL, O_KV_DTYPE}, {"lengths", required_argument, NULL, O_LENGTHS},
      {"page-size", required_argument, NULL, O_PAGE_SIZE}, {"rounds", required_argument, NULL, O_ROUNDS},
      {NULL, 0, NULL, 0}};
  const int big = 1 << 30;
  int kv_heads = 0, c;
  at_shape *s = &o->shape;
  *s = (at_shape){.batch = 2, .q_len = 1024, .kv_len = 1024, .q_heads = 16, .head_dim = 128,
                  .dtype = AT_DTYPE_BF16};
  snprintf(o->impls, sizeof o->impls, "naive,cudnn,default");
  o->timing = (rt_timing_opts){.warmup = 10, .reps = 50};
  o->verify = 1;
  o->rounds = 1;
  o->seed = tn_fresh_seed();
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    const char *a = optarg;
    switch (c) {
    case O_IMPL: snprintf(o->impls, sizeof o->impls, "%s", a), o->impl_given = 1; break;
    case O_BATCH: if (!tn_parse_int("bench", "--batch", a, 1, big, &s->batch)) return -1; break;
    case O_SEQ:
      if (!tn_parse_int("bench", "--seq-len", a, 1, big, &s->q_len)) return -1;
      s->kv_len = s->q_len;
      o->q_len_given = o->kv_len_given = 1;
      break;
    case O_QLEN:
      if (!tn_parse_int("bench", "--q-len", a, 1, big, &s->q_len)) return -1;
      o->q_len_given = 1;
      break;
    case O_KVLEN:
      if (!tn_parse_int("bench", "--kv-len", a, 1, big, &s->kv_len)) return -1;
      o->kv_len_given = 1;
      break;
    case O_LENGTHS: o->lengths = a; break;
    case O_PAGE_SIZE: if (!tn_parse_int("bench", "--page-size", a, 1, 1 << 20, &o->page_size)) return -1; break;
    case O_QH: if (!tn_parse_int("bench", "--q-heads", a, 1, 65535, &s->q_heads)) return -1; break;
    case O_KVH: if (!tn_parse_int("bench", "--kv-heads", a, 1, 65535, &kv_heads)) return -1; break;
    case O_D: if (!tn_parse_int("bench", "--head-dim", a, 1, 512, &s->head_dim)) return -1; break;
    case O_DTYPE:
      if (at_dtype_parse(a, &s->dtype) != AT_OK) return tn_usage_error("bench", "%s", at_last_error()), -1;
      break;
    case O_KV_DTYPE:
      if (at_dtype_parse(a, &s->kv_dtype) != AT_OK) return tn_usage_error("bench", "%s", at_last_error()), -1;
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
    case O_ROUNDS:
      if (!tn_parse_int("bench", "--rounds", a, 1, BENCH_MAX_ROUNDS, &o->rounds)) return -1;
      break;
    case O_OVERHEAD: o->overhead = 1; break;
    case O_SEED: o->seed = strtoull(a, NULL, 0); break;
    case 'h':
    case O_HELP: fputs(USAGE, stdout); return 1;
    default:
      if (optopt) return tn_usage_error("bench", "option '%s' needs a value", argv[optind - 1]), -1;
      return tn_usage_error("bench", "unknown option '%s'", argv[optind - 1]), -1;
    }
  }
  if (optind < argc) return tn_usage_error("bench", "unexpected argument '%s'", argv[optind]), -1;
  s->kv_heads = kv_heads ? kv_heads : s->q_heads;
  if (at_shape_check(s) != AT_OK) return tn_usage_error("bench", "%s", at_last_error()), -1;
  if (s->dtype == AT_DTYPE_F32 && o->overhead)
    return tn_usage_error("bench", "--overhead measures the plan of a fused kernel; %s", TN_F32_NO_FUSED), -1;
  if (o->rounds > 1 && (o->lengths || o->page_size || o->overhead))
    return tn_usage_error("bench", "--rounds times one shape's --impl list; not with %s",
                          o->overhead ? "--overhead" : o->lengths ? "--lengths" : "--page-size"), -1;
  if (o->lengths || o->page_size) return check_serving_options(o);
  if (s->dtype == AT_DTYPE_F32 && !o->impl_given) snprintf(o->impls, sizeof o->impls, "naive");
  if (!check_impls(o->impls, s)) return -1;
  return 0;
}

/* ---- suites ------------------------------------------------------------------------------ */

/* The config file of a suite: a path as given, else NAME.yaml in the places USAGE lists. */
static int find_suite(const char *name, char *path, size_t size)
{
  char exe[1024], dirs[4][1200];
  int n_dirs = 0;
  if (strchr(name, '/') || strstr(name, ".yaml")) {
    snprintf(path, size, "%s", name);
    return access(path, R_OK) == 0;
  }
  const char *env = getenv("ATTNTUNE_CONFIGS");
  if (env && *env) snprintf(dirs[n_dirs++], sizeof dirs[0], "%s", env);
  snprintf(dirs[n_dirs++], sizeof dirs[0], "configs");
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    snprintf(dirs[n_dirs++], sizeof dirs[0], "%s/../share/attntune/configs", exe); /* installed */
    snprintf(dirs[n_dirs++], sizeof dirs[0], "%s/../configs", exe);                /* build tree */
  }
  for (int i = 0; i < n_dirs; i++) {
    snprintf(path, size, "%.1100s/%.200s.yaml", dirs[i], name);
    if (access(path, R_OK) == 0) return 1;
  }
  return 0;
}

static int run_suite(int argc, char **argv)
{
  enum { O_SUITE = 256, O_DB, O_DEVICES, O_FORCE, O_HELP };
  static const struct option options[] = {
      {"suite", required_argument, NULL, O_SUITE}, {"db", required_argument, NULL, O_DB},
      {"devices", required_argument, NULL, O_DEVICES}, {"force", no_argument, NULL, O_FORCE},
      {"help", no_argument, NULL, O_HELP}, {NULL, 0, NULL, 0}};
  tn_tune_opts opts = {.db_path = "attntune.db", .exe = "/proc/self/exe", .watchdog_s = 60, .with_naive = 1};
  const char *suite = NULL, *devices_text = NULL;
  char path[1400];
  int c;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
    case O_SUITE: suite = optarg; break;
    case O_DB: opts.db_path = optarg; break;
    case O_DEVICES: devices_text = optarg; break;
    case O_FORCE: opts.force = 1; break;
    case 'h':
    case O_HELP: fputs(USAGE, stdout); return TN_EXIT_OK;
    default:
      return tn_usage_error("bench", "with --suite, only --db, --devices and --force apply (got '%s')", argv[optind - 1]);
    }
  }
  if (optind < argc) return tn_usage_error("bench", "unexpected argument '%s'", argv[optind]);
  /* Every argument is checked before the driver is loaded. */
  int all = 0, devices[TN_CONFIG_MAX_DEVICES], n = 0;
  if (!tn_check_db_path("bench", opts.db_path)) return TN_EXIT_USAGE;
  if (devices_text && !tn_parse_devices("bench", devices_text, TN_CONFIG_MAX_DEVICES, &all, devices, &n))
    return TN_EXIT_USAGE;
  if (!find_suite(suite, path, sizeof path))
    return tn_usage_error("bench", "no suite '%s' (looked for %s.yaml in $ATTNTUNE_CONFIGS, ./configs and "
                          "share/attntune/configs)", suite, suite);
  tn_config cfg;
  at_status rc = tn_config_load(path, &cfg);
  if (rc == AT_OK && (rc = tn_config_refuse_serving(&cfg)) != AT_OK) tn_config_free(&cfg);
  if (rc != AT_OK) {
    fprintf(stderr, "attntune bench: %s\n", at_last_error());
    return TN_EXIT_USAGE;
  }
  if (!devices_text) { /* the config's devices; the codelab's are all */
    all = cfg.all_devices, n = cfg.n_devices;
    memcpy(devices, cfg.devices, sizeof devices);
  }
  if ((rc = tn_resolve_devices(all, TN_CONFIG_MAX_DEVICES, devices, &n)) != AT_OK) {
    tn_config_free(&cfg);
    return tn_fail_exit("bench", rc);
  }
  fprintf(stderr, "attntune bench: suite %s (%s): %d shapes on %d GPU%s, cache %s\n", suite, path,
          cfg.n_shapes, n, n == 1 ? "" : "s", opts.db_path);
  int code = tn_tune_run(&cfg, &opts, devices, n);
  tn_config_free(&cfg);
  if (code == TN_EXIT_OK) fprintf(stderr, "attntune bench: see the results with 'attntune report --db %s'\n", opts.db_path);
  return code;
}

/* ---- library overhead ----------------------------------------------------------------------- */

static double host_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

enum { OVERHEAD_BATCH = 256, OVERHEAD_ROUNDS = 40 };

/* Host microseconds per enqueue, the median over rounds of OVERHEAD_BATCH enqueues each (few
 * enough that the launch queue never fills and blocks the host). */
static at_status per_call_us(at_context *ctx, at_plan *plan, const at_tensors *t, const rt_launch_frame *raw,
                             double *us)
{
  float rounds[OVERHEAD_ROUNDS];
  at_status rc = AT_OK;
  for (int r = 0; r < OVERHEAD_ROUNDS && rc == AT_OK; r++) {
    if ((rc = at_synchronize(ctx)) != AT_OK) break;
    double t0 = host_us();
    for (int i = 0; i < OVERHEAD_BATCH && rc == AT_OK; i++) {
      if (!raw) {
        rc = at_plan_run(plan, t, NULL, NULL);
        continue;
      }
      for (int k = 0; k < raw->desc.n_kernels && rc == AT_OK; k++) {
        if (raw->dims[k].grid[0] == 0) continue; /* nothing to do (fa3 .tw's combine when it splits nothing) */
        rc = RT_CU(rt_cu()->cuLaunchKernel(raw->fn[k], raw->dims[k].grid[0], raw->dims[k].grid[1],
                                           raw->dims[k].grid[2], raw->dims[k].block[0], raw->dims[k].block[1],
                                           raw->dims[k].block[2], raw->dims[k].smem_bytes, NULL,
                                           (void **)raw->args[k], NULL));
      }
    }
    rounds[r] = (float)((host_us() - t0) / OVERHEAD_BATCH);
  }
  if (rc == AT_OK) rc = at_synchronize(ctx);
  rt_timing med; /* of microseconds here */
  rt_timing_summarize(rounds, OVERHEAD_ROUNDS, 1.0, &med);
  *us = med.median_ms;
  return rc;
}

static at_status overhead_plans(const bench_opts *o, const char *db, double *scratch_ms, double *cached_ms,
                                char *impl, size_t impl_size)
{
  at_context *ctx = NULL;
  at_plan *plan = NULL;
  at_plan_info info;
  at_status rc = at_context_create(o->device, db, AT_CONTEXT_CACHE_WRITABLE, &ctx);
  if (rc == AT_OK) rc = at_plan_create(ctx, &o->shape, NULL, NULL, &plan);
  if (rc == AT_OK) rc = at_plan_describe(plan, &info);
  if (rc == AT_OK && !info.compiled) rc = at_fail(AT_ERR_INVALID, "the first plan did not compile (%s)", info.reason);
  if (rc == AT_OK) *scratch_ms = info.create_ms, snprintf(impl, impl_size, "%s", info.impl);
  at_plan_destroy(plan), plan = NULL;
  at_context_destroy(ctx), ctx = NULL;
  /* A new context has no loaded modules: this plan reads the cubin the first one stored. */
  if (rc == AT_OK) rc = at_context_create(o->device, db, 0, &ctx);
  if (rc == AT_OK) rc = at_plan_create(ctx, &o->shape, NULL, NULL, &plan);
  if (rc == AT_OK) rc = at_plan_describe(plan, &info);
  if (rc == AT_OK && info.compiled) rc = at_fail(AT_ERR_INVALID, "the second plan compiled again");
  if (rc == AT_OK) *cached_ms = info.create_ms;
  at_plan_destroy(plan);
  at_context_destroy(ctx);
  return rc;
}

static int run_overhead(const bench_opts *o)
{
  char db[64], impl[GEN_KEY_MAX] = "";
  double scratch_ms = 0, cached_ms = 0, api_us = 0, raw_us = 0;
  snprintf(db, sizeof db, "/tmp/attntune-overhead-%d.db", (int)getpid());
  unlink(db);
  at_status rc = overhead_plans(o, db, &scratch_ms, &cached_ms, impl, sizeof impl);
  at_context *ctx = NULL;
  at_plan *plan = NULL;
  void *bufs[4] = {NULL, NULL, NULL, NULL};
  at_layout l = at_layout_bshd(&o->shape);
  size_t esz = at_dtype_size(o->shape.dtype), esz_kv = at_dtype_size(at_shape_kv_dtype(&o->shape));
  size_t nq = (size_t)o->shape.batch * o->shape.q_len * o->shape.q_heads * o->shape.head_dim;
  size_t nkv = (size_t)o->shape.batch * o->shape.kv_len * o->shape.kv_heads * o->shape.head_dim;
  size_t sizes[4] = {nq * esz, nkv * esz_kv, nkv * esz_kv, nq * esz};
  if (rc == AT_OK) rc = at_context_create(o->device, db, 0, &ctx);
  if (rc == AT_OK) rc = at_plan_create(ctx, &o->shape, NULL, NULL, &plan);
  for (int i = 0; i < 4 && rc == AT_OK; i++) {
    rc = at_device_alloc(ctx, sizes[i], &bufs[i]);
    if (rc == AT_OK) rc = rt_fill_u32((CUdeviceptr)(uintptr_t)bufs[i], 0x3c003c00u, sizes[i] / 4); /* 1.0 in f16 pairs: finite inputs */
  }
  at_tensors t = {bufs[0], bufs[1], bufs[2], bufs[3], NULL, l.q, l.k, l.v, l.o};
  rt_variant kernel;
  CUdeviceptr plan_scratch = 0;
  static rt_launch_frame frame; /* large (argument slots for every kernel), and args point into it */
  if (rc == AT_OK) rc = rt_plan_kernel(plan, &kernel, &plan_scratch);
  if (rc == AT_OK) rc = rt_variant_prepare(&kernel, &o->shape, &t, NULL, plan_scratch, &frame);
  for (int round = 0; round < 2 && rc == AT_OK; round++) { /* the second round is the one kept */
    if ((rc = per_call_us(ctx, plan, &t, NULL, &api_us)) == AT_OK)
      rc = per_call_us(ctx, plan, &t, &frame, &raw_us);
  }
  for (int i = 0; i < 4; i++) at_device_free(ctx, bufs[i]);
  at_plan_destroy(plan);
  at_context_destroy(ctx);
  unlink(db);
  if (rc != AT_OK) return tn_fail_exit("bench", rc);
  const at_shape *s = &o->shape;
  printf("shape: B=%d T=%d S=%d Nq=%d Nkv=%d D=%d %s mask=%s; kernel %s\n", s->batch, s->q_len, s->kv_len,
         s->q_heads, s->kv_heads, s->head_dim, at_dtypes_name(s->dtype, s->kv_dtype), at_mask_name(s->mask),
         impl);
  printf("%-44s %12s  %s\n", "measure", "value", "target");
  printf("%-44s %9.2f ms\n", "plan from scratch (NVRTC compile)", scratch_ms);
  printf("%-44s %9.2f ms  <= 5 ms\n", "plan from the cached cubin (new context)", cached_ms);
  printf("%-44s %9.2f us\n", "at_plan_run, host time per call", api_us);
  printf("%-44s %9.2f us\n", "raw cuLaunchKernel, host time per call", raw_us);
  printf("%-44s %9.2f us  <= 2 us\n", "overhead of at_plan_run", api_us - raw_us);
  return TN_EXIT_OK;
}

/* The --rounds table: each implementation's median over its readings, its fastest and slowest,
 * and the fastest median marked. */
static void print_round_medians(const at_shape *s, const bench_readings *r, int rounds)
{
  int best = -1, timed = 0;
  double medians[BENCH_MAX_READ];
  printf("\nmedian of %d rounds (the --impl list forward, then backward, in turn; verified in the first)\n",
         rounds);
  printf("%-44s %10s %9s %10s %10s %8s\n", "impl", "median_ms", tn_is_decode_shape(s) ? "KV TB/s" : "TFLOP/s",
         "fastest", "slowest", "readings");
  for (int i = 0; i < r->n; i++) {
    float ms[BENCH_MAX_ROUNDS];
    int n = r->impl[i].count;
    if (n == 0) continue; /* failed in the first round */
    timed++;
    memcpy(ms, r->impl[i].ms, (size_t)n * sizeof *ms);
    rt_timing tm;
    rt_timing_summarize(ms, n, 1.0, &tm);
    medians[i] = tm.median_ms;
    double rate = tn_is_decode_shape(s) ? tn_kv_tbs(s, medians[i]) : at_shape_flops(s) / (medians[i] * 1e-3) / 1e12;
    printf("%-44s %10.4f %9.*f %10.4f %10.4f %8d\n", r->impl[i].name, medians[i], tn_is_decode_shape(s) ? 2 : 1,
           rate, tm.min_ms, tm.max_ms, n);
    if (best < 0 || medians[i] < medians[best]) best = i;
  }
  if (timed > 1) printf("* fastest median: %s\n", r->impl[best].name);
  fflush(stdout);
}

/* The --impl list, --rounds times: forward in the first round (verified, unless --no-verify),
 * backward in the second, and so on, then the medians. Returns the failures of every round. */
static int run_rounds(tn_harness *h, bench_opts *o)
{
  char *list = strdup(o->impls), *save = NULL, **names = calloc(strlen(o->impls) / 2 + 1, sizeof *names);
  bench_readings *readings = o->rounds > 1 ? calloc(1, sizeof *readings) : NULL;
  int n = 0, failures = 0;
  if (!list || !names || (o->rounds > 1 && !readings)) {
    free(list), free(names), free(readings);
    return fprintf(stderr, "attntune bench: out of memory\n"), 1;
  }
  for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) names[n++] = name;
  o->readings = readings;
  for (int round = 0; round < o->rounds; round++) {
    if (round > 0) {
      o->verify = 0; /* the same kernels on the same inputs: the first round checked them */
      printf("round %d of %d (%s)\n", round + 1, o->rounds, round % 2 ? "backward" : "forward");
    }
    for (int i = 0; i < n; i++) failures += bench_one(h, o, names[round % 2 ? n - 1 - i : i]);
  }
  if (readings && readings->n) print_round_medians(&h->shape, readings, o->rounds);
  o->readings = NULL;
  free(readings), free(names), free(list);
  return failures;
}

int tn_cmd_bench(int argc, char **argv)
{
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--suite") == 0 || strncmp(argv[i], "--suite=", 8) == 0) return run_suite(argc, argv);
  bench_opts o;
  memset(&o, 0, sizeof o);
  int parsed = parse_options(argc, argv, &o);
  if (parsed != 0) return parsed > 0 ? TN_EXIT_OK : TN_EXIT_USAGE;

  if (o.overhead) return run_overhead(&o);
  if (o.lengths || o.page_size) return run_serving(&o);
  rt_ctx ctx;
  tn_harness h;
  at_status rc = rt_ctx_open(o.device, &ctx);
  if (rc != AT_OK) return tn_fail_exit("bench", rc);
  const at_shape *s = &o.shape;
  printf("shape: B=%d T=%d S=%d Nq=%d Nkv=%d D=%d %s mask=%s%s  (%.3g GFLOP", s->batch,
         s->q_len, s->kv_len, s->q_heads, s->kv_heads, s->head_dim, at_dtypes_name(s->dtype, s->kv_dtype),
         at_mask_name(s->mask), s->with_lse ? " lse" : "", at_shape_flops(s) / 1e9);
  if (tn_is_decode_shape(s)) printf(", %.3g MB of K/V: decode, rated in TB/s", tn_kv_bytes(s) / 1e6);
  fputs(")\n", stdout);
  if ((rc = tn_harness_open(&h, &ctx, s, o.seed)) != AT_OK) {
    rt_ctx_close(&ctx);
    return tn_fail_exit("bench", rc);
  }
  if (o.verify && (rc = tn_harness_make_reference(&h)) != AT_OK) {
    tn_harness_close(&h);
    rt_ctx_close(&ctx);
    return tn_fail_exit("bench", rc);
  }
  printf("device: %s (%s), %d input set%s, warm-up %d, graph replay of %d launches, seed %llu\n", ctx.info.name,
         ctx.arch, h.n_sets, h.n_sets == 1 ? "" : "s", o.timing.warmup, o.timing.reps, o.seed);
  print_header(s);
  int failures = run_rounds(&h, &o);
  tn_harness_close(&h);
  rt_ctx_close(&ctx);
  return failures ? TN_EXIT_RUNTIME : TN_EXIT_OK;
}
