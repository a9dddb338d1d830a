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

/* Load cubin, compiled elsewhere for key (a tuning run's pipeline), into ctx's module table, so
 * plans of key made after this load it from there instead of compiling it again. A key already
 * in the table keeps its module. */
at_status rt_context_adopt_cubin(at_context *ctx, const char *key, const void *cubin);

/* Make ctx's GPU current on this thread and say its architecture ("sm_90a"): for the tools' own
 * runtime kernels (rt_compare) on buffers of ctx. */
at_status rt_context_bind(const at_context *ctx, const char **arch);

#endif
