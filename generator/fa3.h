/*
 * fa3.h — the fa3 family (templates/fa3.cu: wgmma, FP8/bf16/f16, sm_90a) behind the gen_ functions
 * of generator.h, which dispatch on gen_variant.family. Internal to generator/.
 */
#ifndef AT_GENERATOR_FA3_H
#define AT_GENERATOR_FA3_H

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
/* The preamble (#defines) and the generated wgmma wrappers that go after common.cuh. */
at_status gen_fa3_preamble(const gen_variant *v, const gen_target *target, const char *key,
                           const char *entry, char *buf, size_t size, int *len);
at_status gen_fa3_wrappers(const gen_variant *v, char **text, size_t *len);

#endif /* AT_GENERATOR_FA3_H */
