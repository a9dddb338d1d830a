/* text.c — see text.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/text.h"

/* Room for `extra` more bytes and the terminating NUL; sets t->failed when memory runs out. */
static int reserve(gen_text *t, size_t extra)
{
  if (t->failed) return 0;
  if (t->buf && t->len + extra < t->cap) return 1;
  size_t want = (t->len + extra + 1) * 2;
  char *p = realloc(t->buf, want);
  if (!p) {
    t->failed = 1;
    return 0;
  }
  t->buf = p;
  t->cap = want;
  return 1;
}

void gen_text_put(gen_text *t, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap); /* the length first, then the text in place */
  va_end(ap);
  if (n < 0) t->failed = 1;
  if (n < 0 || !reserve(t, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

void gen_text_append(gen_text *t, const char *s, size_t n)
{
  if (!reserve(t, n)) return;
  memcpy(t->buf + t->len, s, n);
  t->len += n;
  t->buf[t->len] = '\0';
}
