/*
 * measure.h — how fast a shape ran, in the unit that says how close it came to its limit. Prefix
 * tn_. Prefill is compute bound and reported in TFLOP/s (at_shape_flops); decode is memory bound
 * and reported in TB/s of K/V read (docs/design.md, "Rates").
 * bench, the tuning summary and the report all ask here, so they agree on what a decode shape is.
 */
#ifndef AT_TUNER_MEASURE_H
#define AT_TUNER_MEASURE_H

#include "attntune.h"
#include "generator/generator.h"

/* The longest query that counts as decode: the queries the decode family serves. */
#define TN_DECODE_MAX_T GEN_DECODE_MAX_T

/* 1 <= T <= TN_DECODE_MAX_T. */
int tn_is_decode_shape(const at_shape *shape);
/* Bytes of K and V one call reads once: 2·B·Nkv·S·D·sizeof(K/V dtype), 1 byte per element for
 * an FP8 KV cache. */
double tn_kv_bytes(const at_shape *shape);
/* TB/s of K/V read at ms per call (10^12 bytes per second); NaN unless ms is a positive time. */
double tn_kv_tbs(const at_shape *shape, double ms);

/* A batch of sequences of their own lengths (q_lens[b] x kv_lens[b]; NULL: every sequence the
 * shape's q_len or kv_len long): at_shape_flops (kv_bytes 0) or tn_kv_bytes (kv_bytes 1) of each
 * sequence alone, summed; sequences without queries or keys do no work. What a ragged or paged
 * batch's rates divide: the maxima would overstate a mix of lengths. */
double tn_sequences_work(const at_shape *shape, const int *q_lens, const int *kv_lens, int kv_bytes);

#endif
