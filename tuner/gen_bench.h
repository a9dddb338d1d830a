/*
 * gen_bench.h — `attntune gen --bench`: verify and time generated variants of one shape on GPU 0
 * next to the naive path. Prefix tn_.
 */
#ifndef AT_TUNER_GEN_BENCH_H
#define AT_TUNER_GEN_BENCH_H

#include "generator/generator.h"

/* Returns the CLI exit code (0 ok, 1 runtime failure or a variant failed verification). */
int tn_gen_bench(const at_shape *shape, const gen_target *target, const gen_variant *variants, int n,
                 int reps, int jobs);

#endif
