/*
 * families.h — what the families' files share inside generator/ (internal): the fa3 family
 * (templates/fa3.cu: wgmma, FP8/bf16/f16, sm_90a) behind the gen_ functions of generator.h, which
 * dispatch on gen_variant.family, and the fa2 facts that emission needs.
 */
#ifndef AT_GENERATOR_FAMILIES_H
#define AT_GENERATOR_FAMILIES_H

#include "generator/generator.h"

/* Does target run fa3 at all (sm_90a: wgmma needs the arch-specific target)? */
int gen_fa3_target_ok(const gen_target *target);
at_status gen_fa3_variant_check(const gen_variant *v, const gen_target *target);
int gen_fa3_smem_bytes(const gen_variant *v);
int gen_fa3_register_estimate(const gen_variant *v);
/* Appends the fa3 variants for spec (pruned like fa2's, tile_ok decides the sequence fit) to
 * out[*n..cap). Nothing is appended where the target has no fa3 (not sm_90a). */
at_status gen_fa3_enumerate(const gen_spec *spec, const gen_target *target,
                            int (*tile_ok)(const gen_variant *, const at_shape *), const at_shape *shape,
                            gen_variant *out, int cap, int *n);
/* The fa3 variant used when nothing is tuned for spec, if the target has one. */
int gen_fa3_default(const gen_spec *spec, const gen_target *target, gen_variant *out);
/* A growing NUL-terminated text (emit.c); failed is set, and further writes ignored, when memory
 * runs out. */
typedef struct gen_text {
  char *buf;
  size_t len, cap;
  int failed;
} gen_text;
void gen_text_put(gen_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gen_text_append(gen_text *t, const char *s, size_t n);

/* The generated wgmma wrappers that go after common.cuh, appended to t. */
void gen_fa3_wrappers(const gen_variant *v, gen_text *t);

/* fa2: does the template lower FP8 MMAs to f16 itself on this target (FA2_FP8_VIA_F16)? */
int gen_fa2_fp8_via_f16(const gen_variant *v, const gen_target *target);

#endif /* AT_GENERATOR_FAMILIES_H */
