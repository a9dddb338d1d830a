/*
 * cmd_gen.c — `attntune gen`: list, emit and compile (no GPU needed) the generated
 * fused attention variants for one shape.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/generator.h"
#include "runtime/rt.h"
#include "tuner/cli.h"
#include "tuner/commands.h"

static const char USAGE[] =
    "usage: attntune gen [shape flags] (--list | --emit KEY | --compile)\n"
    "\n"
    "Generate the fused kernel variants for one shape: the fa2 family (FlashAttention-2 style,\n"
    "mma.sync; f16, bf16, FP8), on sm_90a the fa3 family (wgmma; head dims 64/128/256), and for\n"
    "queries of 1 to 16 tokens the decode family (split-KV: the keys split over .sp<N> CTAs whose\n"
    "partials a second kernel combines; f16, bf16; listed first, the default there).\n"
    "\n"
    "shape flags:\n"
    "  --head-dim N        head dim D, a multiple of 8 in 32..256 (required but for --emit)\n"
    "  --dtype T           f16, bf16 (output the same) or e4m3, e5m2 (output bf16); default bf16\n"
    "  --causal            causal mask, top-left (key j visible from row i iff j <= i)\n"
    "  --causal-br         causal mask, bottom-right (j <= i + S - T)\n"
    "  --q-heads N         query heads Nq (default 16)\n"
    "  --kv-heads N        key/value heads Nkv, divides Nq (default Nq)\n"
    "  --lse               also write the row log-sum-exp\n"
    "  --seq-len N         T and S: drops tiles far larger than the sequence\n"
    "  --q-len N           T alone\n"
    "  --kv-len N          S alone (default T)\n"
    "  --arch ARCH         NVRTC target (default sm_90a)\n"
    "  --smem-limit BYTES  dynamic shared memory per block (default: the arch's opt-in limit)\n"
    "\n"
    "actions:\n"
    "  --list              the pruned variant keys, one per line\n"
    "  --emit KEY          print the exact source NVRTC compiles for KEY\n"
    "  --compile           compile every listed variant (NVRTC, no GPU needed) and print registers,\n"
    "                      spill bytes, shared memory and compile time\n"
    "  --jobs N            compile threads (default: one per CPU)\n"
    "  --help              this text\n"
    "\n"
    "To verify and time every listed variant on a GPU: attntune bench --impl fused, or one family\n"
    "with --impl fa2, fa3 or decode (same shape flags).\n";

typedef enum action { ACT_NONE, ACT_LIST, ACT_EMIT, ACT_COMPILE } action;

typedef struct gen_opts {
  at_shape shape;
  int kv_heads_given, seq_kv_given;
  const char *arch;
  int smem_limit; /* 0: arch default */
  int jobs;
  action act;
  const char *key;
} gen_opts;

static int set_action(gen_opts *o, action a, const char *flag)
{
  if (o->act != ACT_NONE) {
    tn_usage_error("gen", "%s conflicts with an earlier action (one of --list, --emit, --compile)", flag);
    return 0;
  }
  o->act = a;
  return 1;
}

/* Returns TN_EXIT_OK to go on, or the exit code to return now. */
static int parse_args(int argc, char **argv, gen_opts *o)
{
  memset(o, 0, sizeof *o);
  o->shape = (at_shape){.batch = 2, .q_len = 0, .kv_len = 0, .q_heads = 16, .kv_heads = 16,
                        .head_dim = 0, .dtype = AT_DTYPE_BF16, .mask = AT_MASK_NONE};
  o->arch = "sm_90a";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    int *int_target = NULL, lo = 1, hi = 1 << 30;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(USAGE, stdout);
      return -1;
    } else if (strcmp(a, "--causal") == 0 || strcmp(a, "--causal-br") == 0) {
      if (o->shape.mask != AT_MASK_NONE) return tn_usage_error("gen", "give only one of --causal and --causal-br");
      o->shape.mask = strcmp(a, "--causal") == 0 ? AT_MASK_CAUSAL_TL : AT_MASK_CAUSAL_BR;
      continue;
    } else if (strcmp(a, "--lse") == 0) {
      o->shape.with_lse = 1;
      continue;
    } else if (strcmp(a, "--list") == 0 || strcmp(a, "--compile") == 0) {
      if (!set_action(o, a[2] == 'l' ? ACT_LIST : ACT_COMPILE, a)) return TN_EXIT_USAGE;
      continue;
    }
    /* Flags with a value from here on. */
    if (strcmp(a, "--head-dim") == 0) int_target = &o->shape.head_dim, lo = 0, hi = 4096;
    else if (strcmp(a, "--q-heads") == 0) int_target = &o->shape.q_heads, hi = 65535;
    else if (strcmp(a, "--kv-heads") == 0) int_target = &o->shape.kv_heads, o->kv_heads_given = 1, hi = 65535;
    else if (strcmp(a, "--q-len") == 0 || strcmp(a, "--seq-len") == 0) int_target = &o->shape.q_len;
    else if (strcmp(a, "--kv-len") == 0) int_target = &o->shape.kv_len, o->seq_kv_given = 1;
    else if (strcmp(a, "--jobs") == 0) int_target = &o->jobs, hi = 64;
    else if (strcmp(a, "--smem-limit") == 0) int_target = &o->smem_limit, lo = 49152, hi = 1 << 20;
    else if (strcmp(a, "--dtype") != 0 && strcmp(a, "--arch") != 0 && strcmp(a, "--emit") != 0) {
      if (a[0] == '-') return tn_usage_error("gen", "unknown option '%s'", a);
      return tn_usage_error("gen", "unexpected argument '%s'", a);
    }
    if (!val) return tn_usage_error("gen", "%s needs a value", a);
    i++;
    if (int_target) {
      if (!tn_parse_int("gen", a, val, lo, hi, int_target)) return TN_EXIT_USAGE;
    } else if (strcmp(a, "--dtype") == 0) {
      if (at_dtype_parse(val, &o->shape.dtype) != AT_OK || o->shape.dtype == AT_DTYPE_F32)
        return tn_usage_error("gen", "unknown dtype '%s' for --dtype (expected f16, bf16, e4m3, e5m2)", val);
    } else if (strcmp(a, "--arch") == 0) {
      o->arch = val;
    } else {
      if (!set_action(o, ACT_EMIT, a)) return TN_EXIT_USAGE;
      o->key = val;
    }
  }
  if (!o->kv_heads_given) o->shape.kv_heads = o->shape.q_heads;
  if (o->act == ACT_NONE) return tn_usage_error("gen", "give an action: --list, --emit KEY or --compile");
  if (o->act != ACT_EMIT && o->shape.head_dim == 0) return tn_usage_error("gen", "--head-dim is required");
  if (!o->seq_kv_given) o->shape.kv_len = o->shape.q_len;
  return TN_EXIT_OK;
}

static at_status make_target(const gen_opts *o, gen_target *t)
{
  if (o->smem_limit) return gen_target_make(o->arch, o->smem_limit, t);
  return gen_target_for_arch(o->arch, t);
}

static int do_emit(const gen_opts *o, const gen_target *target)
{
  gen_variant v;
  char *source = NULL;
  at_status rc = gen_variant_parse(o->key, &v);
  if (rc != AT_OK) return tn_usage_error("gen", "%s", at_last_error());
  rc = gen_emit(&v, target, &source);
  if (rc == AT_ERR_INVALID || rc == AT_ERR_UNSUPPORTED) /* a key the constraints refuse */
    return tn_usage_error("gen", "cannot emit %s for %s: %s", o->key, target->arch, at_last_error());
  if (rc != AT_OK) return tn_fail_exit("gen", rc);
  fputs(source, stdout);
  free(source);
  return TN_EXIT_OK;
}

static int do_compile(const gen_opts *o, const gen_target *target, const gen_variant *vs, int n)
{
  rt_compiled *out = calloc((size_t)n, sizeof *out);
  int failed = 0;
  if (!out) return tn_fail_exit("gen", at_fail(AT_ERR_NOMEM, "no memory for %d compile results", n));
  rt_compile_all(vs, n, target, o->jobs, out);
  printf("%-48s %5s %6s %9s %10s\n", "variant", "regs", "spill", "smem", "compile_ms");
  for (int i = 0; i < n; i++) {
    const rt_compiled *c = &out[i];
    if (c->status != AT_OK) {
      printf("%-48s FAILED: %s\n", c->key, c->message);
      failed++;
      continue;
    }
    int spill = c->resources.spill_store_bytes + c->resources.spill_load_bytes;
    printf("%-48s %5d %6d %9d %10.0f\n", c->key, c->resources.registers, spill,
           gen_smem_bytes(&c->variant) + (c->resources.smem_bytes > 0 ? c->resources.smem_bytes : 0),
           c->compile_ms);
  }
  rt_compiled_free(out, n);
  free(out);
  if (failed) {
    fprintf(stderr, "attntune gen: %d of %d variants failed to compile\n", failed, n);
    return TN_EXIT_RUNTIME;
  }
  return TN_EXIT_OK;
}

int tn_cmd_gen(int argc, char **argv)
{
  gen_opts o;
  gen_target target;
  gen_variant vs[GEN_MAX_VARIANTS];
  int n = 0;
  int code = parse_args(argc, argv, &o);
  if (code < 0) return TN_EXIT_OK; /* --help */
  if (code != TN_EXIT_OK) return code;
  at_status rc = make_target(&o, &target);
  if (rc != AT_OK) return tn_usage_error("gen", "%s", at_last_error());
  if (o.act == ACT_EMIT) return do_emit(&o, &target);

  /* Shape problems (head dim 12, Nq % Nkv != 0) are usage errors. */
  rc = gen_enumerate(&o.shape, &target, vs, GEN_MAX_VARIANTS, &n);
  if (rc == AT_ERR_INVALID || rc == AT_ERR_UNSUPPORTED) return tn_usage_error("gen", "%s", at_last_error());
  if (rc != AT_OK) return tn_fail_exit("gen", rc);
  switch (o.act) {
  case ACT_LIST:
    for (int i = 0; i < n; i++) {
      char key[GEN_KEY_MAX];
      if ((rc = gen_variant_key(&vs[i], key, sizeof key)) != AT_OK) return tn_fail_exit("gen", rc);
      puts(key);
    }
    return TN_EXIT_OK;
  case ACT_COMPILE: return do_compile(&o, &target, vs, n);
  default: return TN_EXIT_USAGE;
  }
}
