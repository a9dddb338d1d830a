/*
 * atpy.h — the native side of the Python package (libattntune_py.so): a plan cache shared by the
 * XLA FFI handler and the Python bindings, and the layout table of the public structs that the
 * Python tests compare against the ctypes declarations.
 *
 * The cache holds one at_context per (device, cache file) and one at_plan per (device, cache
 * file, shape, layout, impl). It lives as long as the process (or until atpy_cache_clear), since
 * XLA calls the handler with no object of ours to hang state on; plans are made on the first call
 * of a shape and reused, so the hot path is a lookup under a mutex and a launch.
 */
#ifndef ATTNTUNE_ATPY_H
#define ATTNTUNE_ATPY_H

#include <stddef.h>
#include <stdint.h>

#include "attntune.h"

/* The plan for (device, shape, layout, impl, db); created on the first call and cached. layout
 * NULL means contiguous BSHD; impl NULL or "" means "auto"; db NULL or "" means no tuning cache.
 * On failure *out is NULL and atpy_last_error() says why. */
AT_API at_status atpy_plan_get(int device, const at_shape *shape, const at_layout *layout, const char *impl,
                               const char *db, at_plan **out);
/* The same for a serving layout (ragged or paged tensors, at_plan_create_serving); layout's
 * struct_size must be this build's sizeof(at_serving_layout). */
AT_API at_status atpy_plan_get_serving(int device, const at_shape *shape, const at_serving_layout *layout,
                                       const char *impl, const char *db, at_plan **out);
/* Run a cached plan; serialized per plan (a plan is run by one thread at a time). */
AT_API at_status atpy_plan_run(at_plan *plan, const at_tensors *t, const at_fp8_args *fp8, void *stream);
/* Run a cached serving plan (at_plan_run_serving). */
AT_API at_status atpy_plan_run_serving(at_plan *plan, const at_serving_tensors *t, const at_fp8_args *fp8,
                                       void *stream);
/* The calling thread's last error of atpy_* (falls back to at_last_error()). */
AT_API const char *atpy_last_error(void);
/* Number of cached plans; destroy them all (and their contexts). Not while a run is in flight. */
AT_API int atpy_cache_size(void);
AT_API void atpy_cache_clear(void);

/* One row of the layout table: a struct's size (field NULL) or one field's offset and size. */
typedef struct atpy_field {
  const char *type; /* "at_shape" */
  const char *field; /* "batch", or NULL for the struct's own row */
  size_t offset, size;
} atpy_field;
/* Row i of the table, or NULL past its end. */
AT_API const atpy_field *atpy_layout_row(int i);

#endif /* ATTNTUNE_ATPY_H */
