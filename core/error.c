/* error.c — the thread-local error message behind at_last_error(). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

enum { MESSAGE_CAP = 8192 };
static _Thread_local char g_message[MESSAGE_CAP];

static void store_message(const char *fmt, va_list ap)
{
  vsnprintf(g_message, sizeof g_message, fmt, ap);
}

at_status at_fail(at_status code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  store_message(fmt, ap);
  va_end(ap);
  return code;
}

at_status at_fail_context(at_status code, const char *fmt, ...)
{
  char old[MESSAGE_CAP];
  char prefix[1024];
  va_list ap;
  memcpy(old, g_message, sizeof old);
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  /* "prefix: old", cut to fit (the old message's tail is the least useful part). */
  size_t n_prefix = strlen(prefix), n_old = strlen(old);
  if (n_prefix + 2 + n_old >= MESSAGE_CAP) n_old = MESSAGE_CAP - 3 - n_prefix;
  memcpy(g_message, prefix, n_prefix);
  memcpy(g_message + n_prefix, ": ", 2);
  memcpy(g_message + n_prefix + 2, old, n_old);
  g_message[n_prefix + 2 + n_old] = '\0';
  return code;
}

void at_clear_error(void) { g_message[0] = '\0'; }

const char *at_last_error(void) { return g_message; }

const char *at_status_name(at_status status)
{
  switch (status) {
  case AT_OK: return "AT_OK";
  case AT_ERR_INVALID: return "AT_ERR_INVALID";
  case AT_ERR_NO_DRIVER: return "AT_ERR_NO_DRIVER";
  case AT_ERR_NO_DEVICE: return "AT_ERR_NO_DEVICE";
  case AT_ERR_CUDA: return "AT_ERR_CUDA";
  case AT_ERR_COMPILE: return "AT_ERR_COMPILE";
  case AT_ERR_CUDNN: return "AT_ERR_CUDNN";
  case AT_ERR_UNSUPPORTED: return "AT_ERR_UNSUPPORTED";
  case AT_ERR_NOMEM: return "AT_ERR_NOMEM";
  case AT_ERR_IO: return "AT_ERR_IO";
  case AT_ERR_CACHE: return "AT_ERR_CACHE";
  case AT_ERR_CONFIG: return "AT_ERR_CONFIG";
  case AT_ERR_MISMATCH: return "AT_ERR_MISMATCH";
  }
  return "AT_ERR_UNKNOWN";
}

const char *at_version(void) { return ATTNTUNE_VERSION_STRING; }
