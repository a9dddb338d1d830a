/*
 * text.h — a growing NUL-terminated text, for emitted sources and generated helpers. Prefix
 * gen_text_. Writes after a failed allocation are ignored and `failed` stays set, so a builder
 * checks once at the end.
 */
#ifndef AT_GENERATOR_TEXT_H
#define AT_GENERATOR_TEXT_H

#include <stddef.h>

typedef struct gen_text {
  char *buf;
  size_t len, cap;
  int failed;
} gen_text;

void gen_text_put(gen_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gen_text_append(gen_text *t, const char *s, size_t n);

#endif /* AT_GENERATOR_TEXT_H */
