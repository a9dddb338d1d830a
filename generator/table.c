/*
 * table.c — the family table: one row per kernel family (each row lives in its family's file),
 * and the order in which gen_enumerate lists families and gen_default_variant asks them.
 */
#include <stddef.h>

#include "generator/family.h"

/* In the order gen_enumerate lists variants and gen_default_variant asks for a default: the
 * faster family first where several apply (docs/perf.md), so a tuning budget that keeps only
 * the first candidates keeps it. */
static const gen_family_ops *const FAMILIES[GEN_FAMILY_COUNT] = {
    [GEN_FAMILY_FA2] = &gen_fa2_family,
    [GEN_FAMILY_FA3] = &gen_fa3_family,
    [GEN_FAMILY_DECODE] = &gen_decode_family,
};
/* decode serves only short queries (T <= 16), where it reads K/V once per KV head; fa3 before fa2
 * wherever both apply. */
static const gen_family ORDER[] = {GEN_FAMILY_DECODE, GEN_FAMILY_FA3, GEN_FAMILY_FA2};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

const gen_family_ops *gen_family_row(gen_family family)
{
  return (unsigned)family < GEN_FAMILY_COUNT ? FAMILIES[family] : NULL;
}

const gen_family *gen_family_order(int *n)
{
  *n = COUNT(ORDER);
  return ORDER;
}
