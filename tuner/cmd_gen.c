/*
 * cmd_gen.c — `attntune gen`: list, emit and compile (no GPU needed) the generated
 * fused attention variants for one shape.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/generator.h"
#include "runtime/rt.h"
#include "tuner/cli.h"
#include "tuner/commands.h"

static const char USAGE[] =
    "usage: attntune gen [shape flags] (--list | --default | --emit KEY | --compile)\n"
    "\n"
    "Generate the fused kernel variants for one shape: the fa2 family (FlashAttention-2 style,\n"
    "mma.sync; f16, bf16, FP8), on sm_90a the fa3 family (wgmma; head dims 64/128/256, and with\n"
    "f16/bf16 also 96/192 in its warp-specialized .ws/.wspp variants: TMA producer; for causal\n"
    "masks each also persistent, .pers: one CTA per SM over the query blocks; without a mask\n"
    "also .tw<W>, the tail split: the last partial wave's query blocks as several CTAs each\n"
    "over slices of the keys, merged by a second kernel (W: the SMs); .qr where the\n"
    "registers allow: Q K^T with Q in registers, loaded once per query block; for FP8 also\n"
    "with V^T ahead, .ws.vt/.wspp.vt: a first kernel transposes V into the scratch, the\n"
    "attention kernel loads V^T tiles by TMA), and for queries\n"
    "of 1 to 16 tokens the decode family (split-KV: the keys split over .sp<N> CTAs whose\n"
    "partials a second kernel combines, or with .lc the last CTA of each group, or with .cl a\n"
    "cluster of them; f16, bf16, and an FP8 KV cache with f16/bf16 Q; on sm_90a, where a CTA\n"
    "packs more than 32 query rows, .wg: the rows on wgmma, K and V loaded by TMA (FP8 K/V\n"
    "widened to f16 by warpgroups of their own; FP8 at 64 rows also .wgi, two warpgroups on\n"
    "the same rows taking the K/V tiles in turn, with bf16 Q at D 128 running Q K^T on the FP8\n"
    "tensor cores, Q split exactly into two E4M3 parts, its stages FP8 staging slots up to 8;\n"
    "and there .wgi3, the same with three warpgroups taking the tiles, 6 slots);\n"
    "listed first, the default there).\n"
    "\n"
    "shape flags:\n"
    "  --head-dim N        head dim D, a multiple of 8 in 32..256 (required but for --emit)\n"
    "  --dtype T           f16, bf16 (output the same) or e4m3, e5m2 (output bf16); default bf16\n"
    "  --kv-dtype T        K and V: e4m3 or e5m2 with f16/bf16 --dtype (an FP8 KV cache, output the\n"
    "                      dtype; the decode family, give --q-len 1..16); default: the dtype\n"
    "  --causal            causal mask, top-left (key j visible from row i iff j <= i)\n"
    "  --causal-br         causal mask, bottom-right (j <= i + S - T)\n"
    "  --batch N           B (default 2): the default's split counts and the listed .tw<W> twins\n"
    "  --q-heads N         query heads Nq (default 16)\n"
    "  --kv-heads N        key/value heads Nkv, divides Nq (default Nq)\n"
    "  --lse               also write the row log-sum-exp\n"
    "  --seq-len N         T and S (1..2^30): drops tiles far larger than the sequence\n"
    "  --q-len N           T alone\n"
    "  --kv-len N          S alone (default T)\n"
    "  --page-size N       K and V paged in pages of N tokens (1, 16, 32, 64, 128, 256; the vLLM\n"
    "                      layout: pools and a block table): the .pg<N> variants, decode's for\n"
    "                      --q-len 1..16, fa2's and fa3's (warp-specialized, 16-bit, pages of\n"
    "                      16 or more) for longer queries and with --ragged-q;\n"
    "                      default: contiguous K/V\n"
    "  --ragged            Q, O, K and V packed along the sequence axis with cu_seqlens (varlen\n"
    "                      prefill; T and S are then the longest sequences): the .rg variants of\n"
    "                      fa2 and of fa3's warp-specialized kernel\n"
    "  --ragged-q          Q and O packed, K and V padded (or paged, with --page-size): the .rgq\n"
    "                      variants\n"
    "  --arch ARCH         NVRTC target (default sm_90a)\n"
    "  --smem-limit BYTES  dynamic shared memory per block (default: the arch's opt-in limit)\n"
    "\n"
    "actions:\n"
    "  --list              the pruned variant keys, one per line\n"
    "  --default           the key of the variant run where nothing is tuned for the shape (what\n"
    "                      'bench --impl default' and an untuned plan run), for --arch's typical\n"
    "                      SM count (132 for sm_90a); it depends on --batch through the split\n"
    "                      counts (decode .sp<N>, fa3 .tw<W>)\n"
    "  --emit KEY          print the exact source NVRTC compiles for KEY\n"
    "  --compile           compile every listed variant (NVRTC, no GPU needed) and print registers,\n"
    "                      spill bytes, shared memory and compile time, and 'wgmmas serialized'\n"
    "                      where ptxas issued a kernel's wgmmas one at a time\n"
    "  --jobs N            compile threads (default: one per CPU)\n"
    "  --help, -h          this text\n"
    "\n"
    "To verify and time every listed variant on a GPU: attntune bench --impl fused, or one family\n"
    "with --impl fa2, fa3 or decode (same shape flags).\n";

typedef enum action { ACT_NONE, ACT_LIST, ACT_DEFAULT, ACT_EMIT, ACT_COMPILE } action;

typedef struct gen_opts {
  at_shape shape;
  int kv_heads_given, seq_kv_given;
  const char *arch;
  int smem_limit; /* 0: arch default */
  int page_size;  /* 0: contiguous K/V */
  int ragged;     /* gen_ragged: 0 padded tensors */
  int jobs;
  action act;
  const char *key;
} gen_opts;

static int set_action(gen_opts *o, action a, const char *flag)
{
  if (o->act != ACT_NONE) {
    tn_usage_error("gen", "%s conflicts with an earlier action (one of --list, --default, --emit, --compile)", flag);
    return 0;
  }
  o->act = a;
  return 1;
}

/* Returns TN_EXIT_OK to go on, -1 after --help, or the exit code to return now. */
static int parse_args(int argc, char **argv, gen_opts *o)
{
  enum { O_HEAD_DIM = 256, O_DTYPE, O_KV_DTYPE, O_CAUSAL, O_CAUSAL_BR, O_QH, O_KVH, O_LSE, O_SEQ, O_QLEN, O_KVLEN, O_ARCH,
         O_SMEM, O_PAGE, O_RAGGED, O_RAGGED_Q, O_LIST, O_DEFAULT, O_EMIT, O_COMPILE, O_JOBS, O_BATCH, O_HELP };
  static const struct option options[] = {
      {"head-dim", required_argument, NULL, O_HEAD_DIM}, {"dtype", required_argument, NULL, O_DTYPE},
      {"kv-dtype", required_argument, NULL, O_KV_DTYPE},
      {"causal", no_argument, NULL, O_CAUSAL},           {"causal-br", no_argument, NULL, O_CAUSAL_BR},
      {"q-heads", required_argument, NULL, O_QH},        {"kv-heads", required_argument, NULL, O_KVH},
      {"lse", no_argument, NULL, O_LSE},                 {"seq-len", required_argument, NULL, O_SEQ},
      {"q-len", required_argument, NULL, O_QLEN},        {"kv-len", required_argument, NULL, O_KVLEN},
      {"arch", required_argument, NULL, O_ARCH},         {"smem-limit", required_argument, NULL, O_SMEM},
      {"page-size", required_argument, NULL, O_PAGE},
      {"ragged", no_argument, NULL, O_RAGGED},           {"ragged-q", no_argument, NULL, O_RAGGED_Q},
      {"list", no_argument, NULL, O_LIST},               {"default", no_argument, NULL, O_DEFAULT},
      {"emit", required_argument, NULL, O_EMIT},         {"batch", required_argument, NULL, O_BATCH},
      {"compile", no_argument, NULL, O_COMPILE},         {"jobs", required_argument, NULL, O_JOBS},
      {"help", no_argument, NULL, O_HELP},               {NULL, 0, NULL, 0}};
  int c, head_dim_given = 0;
  memset(o, 0, sizeof *o);
  o->shape = (at_shape){.batch = 2, .q_len = 0, .kv_len = 0, .q_heads = 16, .kv_heads = 16,
                        .head_dim = 0, .dtype = AT_DTYPE_BF16, .mask = AT_MASK_NONE};
  o->arch = "sm_90a";
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    const char *flag = argv[optind - 1], *a = optarg;
    at_shape *s = &o->shape;
    switch (c) {
    case 'h':
    case O_HELP: fputs(USAGE, stdout); return -1;
    case O_CAUSAL:
    case O_CAUSAL_BR:
      if (s->mask != AT_MASK_NONE) return tn_usage_error("gen", "give only one of --causal and --causal-br");
      s->mask = c == O_CAUSAL ? AT_MASK_CAUSAL_TL : AT_MASK_CAUSAL_BR;
      break;
    case O_LSE: s->with_lse = 1; break;
    case O_RAGGED:
    case O_RAGGED_Q:
      if (o->ragged) return tn_usage_error("gen", "give only one of --ragged and --ragged-q");
      o->ragged = c == O_RAGGED ? GEN_RAGGED_QKV : GEN_RAGGED_Q;
      break;
    case O_LIST: if (!set_action(o, ACT_LIST, "--list")) return TN_EXIT_USAGE; break;
    case O_DEFAULT: if (!set_action(o, ACT_DEFAULT, "--default")) return TN_EXIT_USAGE; break;
    case O_COMPILE: if (!set_action(o, ACT_COMPILE, "--compile")) return TN_EXIT_USAGE; break;
    case O_EMIT:
      if (!set_action(o, ACT_EMIT, "--emit")) return TN_EXIT_USAGE;
      o->key = a;
      break;
    case O_HEAD_DIM:
      if (!tn_parse_int("gen", "--head-dim", a, 1, 512, &s->head_dim)) return TN_EXIT_USAGE;
      head_dim_given = 1;
      break;
    case O_QH: if (!tn_parse_int("gen", "--q-heads", a, 1, 65535, &s->q_heads)) return TN_EXIT_USAGE; break;
    case O_BATCH: /* as bench parses it; at_shape_check bounds B with the other sizes below */
      if (!tn_parse_int("gen", "--batch", a, 1, 1 << 30, &s->batch)) return TN_EXIT_USAGE;
      break;
    case O_KVH:
      if (!tn_parse_int("gen", "--kv-heads", a, 1, 65535, &s->kv_heads)) return TN_EXIT_USAGE;
      o->kv_heads_given = 1;
      break;
    case O_SEQ:
    case O_QLEN:
      if (!tn_parse_int("gen", c == O_SEQ ? "--seq-len" : "--q-len", a, 1, AT_MAX_SEQ_LEN, &s->q_len))
        return TN_EXIT_USAGE;
      break;
    case O_KVLEN:
      if (!tn_parse_int("gen", "--kv-len", a, 1, AT_MAX_SEQ_LEN, &s->kv_len)) return TN_EXIT_USAGE;
      o->seq_kv_given = 1;
      break;
    case O_JOBS: if (!tn_parse_int("gen", "--jobs", a, 1, 64, &o->jobs)) return TN_EXIT_USAGE; break;
    case O_SMEM: if (!tn_parse_int("gen", "--smem-limit", a, 49152, 1 << 20, &o->smem_limit)) return TN_EXIT_USAGE; break;
    case O_DTYPE:
      if (at_dtype_parse(a, &s->dtype) != AT_OK || s->dtype == AT_DTYPE_F32)
        return tn_usage_error("gen", "unknown dtype '%s' for --dtype (expected f16, bf16, e4m3, e5m2)", a);
      break;
    case O_KV_DTYPE:
      if (at_dtype_parse(a, &s->kv_dtype) != AT_OK || s->kv_dtype == AT_DTYPE_F32)
        return tn_usage_error("gen", "unknown dtype '%s' for --kv-dtype (expected e4m3, e5m2, or the --dtype)", a);
      break;
    case O_ARCH: o->arch = a; break;
    case O_PAGE:
      if (!tn_parse_int("gen", "--page-size", a, 1, 256, &o->page_size)) return TN_EXIT_USAGE;
      if (!at_page_size_allowed(o->page_size))
        return tn_usage_error("gen", "--page-size %d not allowed (expected %s)", o->page_size, at_page_sizes_text());
      break;
    default:
      if (optopt) return tn_usage_error("gen", "option '%s' needs a value", flag);
      return tn_usage_error("gen", "unknown option '%s'", flag);
    }
  }
  if (optind < argc) return tn_usage_error("gen", "unexpected argument '%s'", argv[optind]);
  if (!o->kv_heads_given) o->shape.kv_heads = o->shape.q_heads;
  if (o->act == ACT_NONE) return tn_usage_error("gen", "give an action: --list, --default, --emit KEY or --compile");
  if (o->act != ACT_EMIT && !head_dim_given) return tn_usage_error("gen", "--head-dim is required");
  if (o->act == ACT_EMIT && o->page_size)
    return tn_usage_error("gen", "--page-size is for --list and --compile (a key spells its own: .pg<N>)");
  if (o->act == ACT_EMIT && o->ragged)
    return tn_usage_error("gen", "--ragged and --ragged-q are for --list and --compile (a key spells its own: .rg, .rgq)");
  if (o->ragged == GEN_RAGGED_QKV && o->page_size)
    return tn_usage_error("gen", "--page-size with --ragged: paged K/V is not packed (ragged Q with paged K/V is "
                                 "--ragged-q --page-size N)");
  if (!o->seq_kv_given) o->shape.kv_len = o->shape.q_len;
  if (o->act != ACT_EMIT) {
    /* The sizes at_shape_check bounds; an unknown length (0: any) is checked as 1. */
    at_shape check = o->shape;
    if (check.q_len == 0) check.q_len = 1;
    if (check.kv_len == 0) check.kv_len = 1;
    if (at_shape_check(&check) != AT_OK) return tn_usage_error("gen", "%s", at_last_error());
  }
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
    printf("%-48s %5d %6d %9d %10.0f%s\n", c->key, c->resources.registers, spill,
           gen_smem_bytes(&c->variant) + (c->resources.smem_bytes > 0 ? c->resources.smem_bytes : 0),
           c->compile_ms, c->resources.wgmma_serialized ? "  wgmmas serialized (ptxas)" : "");
  }
  rt_compiled_free(out, n);
  free(out);
  if (failed) {
    fprintf(stderr, "attntune gen: %d of %d variants failed to compile\n", failed, n);
    return TN_EXIT_RUNTIME;
  }
  return TN_EXIT_OK;
}

/* The default is chosen as the runtime chooses it for an untuned call (runtime/lookup.c). */
static int print_default(const gen_opts *o, const gen_target *target)
{
  gen_variant v;
  char key[GEN_KEY_MAX];
  at_status rc = gen_default_variant_serving(&o->shape, o->page_size, o->ragged, target, &v);
  if (rc == AT_ERR_INVALID || rc == AT_ERR_UNSUPPORTED) return tn_usage_error("gen", "%s", at_last_error());
  if (rc != AT_OK || (rc = gen_variant_key(&v, key, sizeof key)) != AT_OK) return tn_fail_exit("gen", rc);
  puts(key);
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
  rc = gen_enumerate_serving(&o.shape, o.page_size, o.ragged, &target, vs, GEN_MAX_VARIANTS, &n);
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
  case ACT_DEFAULT: return print_default(&o, &target);
  case ACT_COMPILE: return do_compile(&o, &target, vs, n);
  default: return TN_EXIT_USAGE;
  }
}
