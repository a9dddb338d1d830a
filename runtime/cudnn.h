/*
 * cudnn.h — cuDNN loaded at run time (runtime/cudnn.c): the table of the backend entry points
 * attntune calls, and the check that turns a cuDNN status into a message. The SDPA graphs built
 * on it are cudnn_sdpa.h's. Internal; prefix rt_cudnn_.
 */
#ifndef AT_RUNTIME_CUDNN_H
#define AT_RUNTIME_CUDNN_H

#include <stddef.h>

#include <cudnn_backend.h>

#include "attntune.h"

/* ---- the backend API, loaded at run time -------------------------------------------------- */

#define RT_CUDNN_FUNCTIONS(X)                                                                     \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnGetLastErrorString) X(cudnnCreate)              \
  X(cudnnDestroy) X(cudnnSetStream) X(cudnnBackendCreateDescriptor)                                \
  X(cudnnBackendDestroyDescriptor) X(cudnnBackendSetAttribute) X(cudnnBackendGetAttribute)        \
  X(cudnnBackendFinalize) X(cudnnBackendExecute)

typedef struct rt_cudnn_api {
#define RT_CUDNN_FIELD(name) __typeof__(&name) name;
  RT_CUDNN_FUNCTIONS(RT_CUDNN_FIELD)
#undef RT_CUDNN_FIELD
} rt_cudnn_api;

/* The loaded table; only valid after rt_cudnn_load() returned AT_OK. */
const rt_cudnn_api *rt_cudnn(void);

/* AT_OK for CUDNN_STATUS_SUCCESS; else AT_ERR_UNSUPPORTED for a NOT_SUPPORTED category status
 * and AT_ERR_CUDNN for the rest, with a message naming the call, where it was made, the status
 * and cuDNN's last error string. */
at_status rt_cudnn_check(cudnnStatus_t status, const char *expr, const char *file, int line);
#define RT_CUDNN(expr) rt_cudnn_check((expr), #expr, __FILE__, __LINE__)

/* cuDNN's explanation of the last failure on this thread (cudnnGetLastErrorString), as one line:
 * see rt_cudnn_summarize. Empty when cuDNN gave none. */
void rt_cudnn_last_reason(char *out, size_t cap);
/* Boil cuDNN's multi-line error text down to one line. The text lists, per engine
 * ('{"engineId":N,...}' lines) or per error stack, the failing frames innermost first as
 * "...CUDNN_STATUS_X; Reason: <why>" lines; the first reason of each block is the one that says
 * something ("Embedding dim per head for q and k is not a multiple of 8 at: d_qk % 8 != 0"),
 * the rest name functions. Result: "[eng1] <why>; [eng3] <other why>", duplicates dropped; text
 * without any "Reason:" is kept with its line breaks turned into spaces. */
void rt_cudnn_summarize(const char *raw, char *out, size_t cap);

#endif /* AT_RUNTIME_CUDNN_H */
