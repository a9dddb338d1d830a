/*
 * family.h — a kernel family as the generator sees it (internal to generator/): the row type of
 * the family table. A kernel family is one file (generator/<name>.c), one template
 * (templates/<name>.cu) and one row in table.c; the gen_ functions of generator.h dispatch
 * through the row of gen_variant.family (families.c). Files call one way: families.c, emit.c ->
 * variant.c -> table.c -> fa2.c, fa3.c, decode.c -> rules.c, target.c.
 */
#ifndef AT_GENERATOR_FAMILY_H
#define AT_GENERATOR_FAMILY_H

#include "generator/generator.h"
#include "generator/text.h"

typedef struct gen_family_ops {
  const char *name;          /* key prefix: "fa2" */
  const char *template_file; /* embedded template: "fa2.cu" */
  const char *macro_prefix;  /* of the preamble's #defines: "FA2" */
  int split_kv;              /* variants carry a split count (.sp<N> in the key; 0 elsewhere) */
  int warp_specialized;      /* variants may be warp-specialized (.ws in the key; 0 elsewhere) */
  int paged;                 /* K/V may be paged (spec.page_size, .pg<N> in the key; 0 elsewhere) */
  int ragged;                /* tensors may be ragged (spec.ragged, .rg/.rgq in the key; 0 elsewhere) */
  int wgmma_rows;            /* variants may run their packed rows on wgmma (.wg in the key; 0 elsewhere) */
  /* Does target run the family at all? Sets no error. */
  int (*target_ok)(const gen_target *target);
  /* What of a spec the family refuses, whatever its tiles (dtype pairs, head dims). */
  at_status (*spec_check)(const gen_spec *spec);
  at_status (*check)(const gen_variant *v, const gen_target *target);
  int (*threads)(const gen_variant *v);
  int (*smem_bytes)(const gen_variant *v);
  int (*register_estimate)(const gen_variant *v);
  /* Append the family's variants for spec (checked, fitting shape's known sizes) to out[*n..cap). */
  at_status (*enumerate)(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                         gen_variant *out, int cap, int *n);
  /* The family's variant when nothing is tuned; 0 when it has none for this shape. */
  int (*default_variant)(const gen_spec *spec, const gen_target *target, const at_shape *shape,
                         gen_variant *out);
  /* Family-specific #defines after the common ones (may be NULL); entry is gen_entry_name's. */
  void (*extra_preamble)(const gen_variant *v, const gen_target *target, const char *entry, gen_text *t);
  /* Generated device code between common.cuh and the template (may be NULL). */
  void (*helpers)(const gen_variant *v, gen_text *t);
  /* Entry points of v's module after the first (gen_entry_name): suffixes appended to it
   * (NULL-terminated; NULL: none). May be NULL. */
  const char *const *(*extra_entries)(const gen_variant *v);
  at_status (*describe_launch)(const gen_variant *v, const at_shape *shape, gen_launch_desc *out);
} gen_family_ops;

/* The row of a family, or NULL (table.c). */
const gen_family_ops *gen_family_row(gen_family family);
/* The families in the order gen_enumerate lists them and gen_default_variant asks them. */
const gen_family *gen_family_order(int *n);

extern const gen_family_ops gen_fa2_family;
extern const gen_family_ops gen_fa3_family;
extern const gen_family_ops gen_decode_family;

/* Shared by the families' files (rules.c). */
int gen_round_up(int x, int m);
/* 1 when a tile of `tile` rows is at least twice len (> 0) rounded up to 16; 64-bit arithmetic. */
int gen_tile_too_long(int tile, int len);
/* ceil(len / tile) in 64 bits. */
long long gen_tiles(int len, int tile);
/* Tiles far larger than a known sequence only add masked work (fa2's and fa3's rule). */
int gen_tile_makes_sense(const gen_variant *v, const at_shape *shape);
/* The register budget per thread of a variant with `threads` threads: 64K / threads, at most 255. */
int gen_register_budget(int threads);
/* The refusal of a family that reads K and V in Q's dtype, for a spec with an FP8 KV cache
 * (AT_ERR_UNSUPPORTED, naming the family that runs it). */
at_status gen_refuse_kv_dtype(const char *family, const gen_spec *spec);
/* The constraints every family states the same way: shared memory and register budget. */
at_status gen_check_budgets(const gen_target *target, int threads, int smem, int regs);
/* The single-kernel launch fa2 and fa3 share: grid (ceil(T / block_m), Nq, B), their argument list
 * (ragged variants: T is the longest sequence, and the offsets and totals follow the list). */
at_status gen_describe_fa_launch(const gen_variant *v, const at_shape *shape, int threads, int smem,
                                 gen_launch_desc *out);
/* Paged K/V is never packed K/V: AT_ERR_INVALID for a page size with GEN_RAGGED_QKV (ragged Q with
 * paged K/V is GEN_RAGGED_Q, .pg<N>.rgq), AT_OK otherwise. */
at_status gen_refuse_packed_paged(int page_size, int ragged);
/* Appends n arguments to k's list, refusing a list longer than GEN_MAX_ARGS. */
at_status gen_launch_append_args(gen_kernel_launch *k, const gen_arg *args, int n);
/* Paged K/V's arguments, after a kernel's others: block table, seqlens_kv, max_pages_per_seq,
 * num_pages (templates/decode.cu and fa2.cu "Paged K/V"). */
at_status gen_launch_append_paged_args(gen_kernel_launch *k);

/* wgmma wrappers as generated helpers: `name` issues one m64n<n>k<k> wgmma with fp32 accumulators
 * d[0 .. n/2). _ss: A and B from shared-memory descriptors, d zeroed first when accumulate is 0;
 * _rs: A from four registers (a[0..3]), B from a descriptor, always accumulating. type_a/type_b
 * are PTX type names (bf16, f16, e4m3, e5m2); tail the trailing immediates (scale-a, scale-b and
 * for 16-bit types the transpose bits). */
void gen_wgmma_ss(gen_text *t, const char *name, int n, int k, const char *type_a, const char *type_b,
                  const char *tail);
void gen_wgmma_rs(gen_text *t, const char *name, int n, int k, const char *type_a, const char *type_b,
                  const char *tail);
/* _rs with d zeroed first when accumulate is 0, as _ss. */
void gen_wgmma_rs_acc(gen_text *t, const char *name, int n, int k, const char *type_a, const char *type_b,
                      const char *tail);

#endif /* AT_GENERATOR_FAMILY_H */
