// fp8_p_error.c — what P in E4M3 would cost O's accuracy: the attention of 16 query rows over S keys
// (D 128, Q, K and V uniform in [-1, 1) as attntune's checks draw them, scores scaled by 1/sqrt(D)),
// once in double and once with each p = exp(s - max) rounded to E4M3 by the library's own
// conversion (times a scale, then divided by it) as a P V on the FP8 tensor cores would take it,
// the row sums exact. Prints O's relative L2 error between the two, the figure attntune's checks
// hold against the dtype's tolerance (1e-2 for bf16 output). A CPU count, no GPU; from a build:
//
//   cc -O2 -Iinclude -o fp8_p_error scripts/fp8_p_error.c build/libattntune.a -lm
//   ./fp8_p_error [S [P_SCALE [Q_GAIN]]]
//
// S defaults to 16384, P_SCALE to 448 (p times 448 into E4M3's range, as fa3's FP8 path does), and
// Q_GAIN to 1 (a larger gain sharpens the softmax).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attntune.h"

enum { D = 128, ROWS = 16 };

static double uniform(void) { return 2.0 * rand() / ((double)RAND_MAX + 1) - 1.0; }

int main(int argc, char **argv)
{
  const int S = argc > 1 ? atoi(argv[1]) : 16384;
  const double p_scale = argc > 2 ? atof(argv[2]) : 448.0, q_gain = argc > 3 ? atof(argv[3]) : 1.0;
  if (S < 1 || !(p_scale > 0) || !(q_gain > 0)) {
    fprintf(stderr, "usage: fp8_p_error [S >= 1 [P_SCALE > 0 [Q_GAIN > 0]]]\n");
    return 2;
  }
  double *k = malloc(sizeof *k * S * D), *v = malloc(sizeof *v * S * D), *s = malloc(sizeof *s * S);
  if (!k || !v || !s) {
    fprintf(stderr, "fp8_p_error: no memory for S = %d\n", S);
    return 1;
  }
  srand(7);
  for (long i = 0; i < (long)S * D; i++) k[i] = uniform(), v[i] = uniform();
  double err2 = 0, ref2 = 0;
  for (int r = 0; r < ROWS; r++) {
    double q[D], o[D] = {0}, o8[D] = {0}, l = 0, m = -INFINITY;
    for (int d = 0; d < D; d++) q[d] = uniform() * q_gain;
    for (int j = 0; j < S; j++) {
      double dot = 0;
      for (int d = 0; d < D; d++) dot += q[d] * k[(long)j * D + d];
      s[j] = dot / sqrt(D);
      m = fmax(m, s[j]);
    }
    for (int j = 0; j < S; j++) {
      const double p = exp(s[j] - m), p8 = at_e4m3_to_f32(at_f32_to_e4m3((float)(p * p_scale))) / p_scale;
      l += p;
      for (int d = 0; d < D; d++) o[d] += p * v[(long)j * D + d], o8[d] += p8 * v[(long)j * D + d];
    }
    for (int d = 0; d < D; d++) err2 += (o8[d] - o[d]) * (o8[d] - o[d]) / (l * l), ref2 += o[d] * o[d] / (l * l);
  }
  printf("S %d, P scale %g, Q gain %g: O's relative L2 error with P in E4M3 %.3e\n", S, p_scale, q_gain,
         sqrt(err2 / ref2));
  free(k), free(v), free(s);
  return 0;
}
