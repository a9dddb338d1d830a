/*
 * fuzz_variant.c — libFuzzer target: variant keys (gen_variant_parse) on arbitrary bytes. A key
 * that parses must be canonical (format it again and get the same bytes); one that also passes
 * gen_variant_check on sm_90a (or sm_80) goes through the entry names, the resource estimates and
 * the kernel emitter. Seeds: keys from `attntune gen --list`.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "generator/generator.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* Keys are C strings: a NUL inside ends the key, as it would for any caller. */
  char *key = malloc(size + 1);
  if (!key) return 0;
  memcpy(key, data, size);
  key[size] = '\0';
  gen_variant v;
  if (gen_variant_parse(key, &v) == AT_OK) {
    char again[GEN_KEY_MAX];
    if (gen_variant_key(&v, again, sizeof again) != AT_OK || strcmp(again, key) != 0) abort();
    if (!gen_is_variant_key(key)) abort();
    char names[GEN_MAX_KERNELS][GEN_ENTRY_MAX];
    int n = 0;
    if (gen_entry_names(&v, names, &n) != AT_OK || n < 1 || n > GEN_MAX_KERNELS) abort();
    static const char *const ARCHS[] = {"sm_90a", "sm_80"};
    for (size_t a = 0; a < sizeof ARCHS / sizeof *ARCHS; a++) {
      gen_target t;
      if (gen_target_for_arch(ARCHS[a], &t) != AT_OK) abort();
      if (gen_variant_check(&v, &t) != AT_OK) continue;
      if (gen_threads(&v) < 1 || gen_smem_bytes(&v) < 0) abort();
      (void)gen_register_estimate(&v);
      char *source = NULL;
      if (gen_emit(&v, &t, &source) == AT_OK && (!source || !*source)) abort();
      free(source);
      break;
    }
  }
  free(key);
  return 0;
}
