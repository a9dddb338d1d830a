/*
 * api_internal.h — what attntune's own tools may ask of a plan beyond the public API (the
 * overhead benchmark launches a plan's kernel directly to compare).
 */
#ifndef AT_RUNTIME_API_INTERNAL_H
#define AT_RUNTIME_API_INTERNAL_H

#include "attntune.h"
#include "generator/generator.h"

/* The fa2 variant and kernel of a plan; AT_ERR_INVALID for cuDNN and naive plans. */
at_status rt_plan_kernel(const at_plan *plan, gen_variant *variant, CUfunction *fn);

#endif
