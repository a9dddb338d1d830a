/*
 * api_internal.h — what attntune's own tools may ask of a plan beyond the public API (the
 * overhead benchmark launches a plan's kernel directly to compare).
 */
#ifndef AT_RUNTIME_API_INTERNAL_H
#define AT_RUNTIME_API_INTERNAL_H

#include "attntune.h"
#include "runtime/rt.h"

/* The generated variant of a plan (its module belongs to the plan's context) and the plan's
 * scratch; AT_ERR_INVALID for cuDNN and naive plans. */
at_status rt_plan_kernel(const at_plan *plan, rt_variant *kernel, CUdeviceptr *scratch);

#endif
