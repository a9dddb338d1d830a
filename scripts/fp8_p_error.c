// fp8_p_error.c — what P in E4M3 would cost O's accuracy: the attention of 16 query rows over S keys
// (D 128, Q, K and V uniform in [-1, 1) as attntune's checks draw them, scores scaled by 1/sqrt(D)),
// once in double and once with each p = exp(s - max) rounded to E4M3 by the library's own
// conversion (times a scale, then divided by it) as a P V on the FP8 tensor cores would take it,
// the row sums exact. Prints O's relative L2 error between the two, the figure attntune's checks
// hold against the dtype's tolerance (1e-2 for bf16 output). A CPU count, no GPU; from a build:
//
//   cc -O2 -Iinclude -o fp8_p_error scripts/fp8_p_error.c build/libattntune.a -lm
//   ./fp8_p_error [S [P_SCALE [Q_GAIN [Q8]]]]
//
// S defaults to 16384, P_SCALE to 448 (p times 448 into E4M3's range, as fa3's FP8 path does), and
// Q_GAIN to 1 (a larger gain sharpens the softmax). Q8 = 1 rounds Q to E4M3 as well (after a power
// of two that puts the 16 rows' largest |q| in [2^7, 2^8), as decode's K8 scales it), in both
// products' inputs: what Q K^T on the FP8 tensor cores with Q in one E4M3 part would cost; Q8 = 2
// rounds Q alone (P exact).
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
  const int q8 = argc > 4 ? atoi(argv[4]) : 0;
  if (S < 1 || !(p_scale > 0) || !(q_gain > 0) || q8 < 0 || q8 > 2) {
    fprintf(stderr, "usage: fp8_p_error [S >= 1 [P_SCALE > 0 [Q_GAIN > 0 [Q8 0, 1 or 2]]]]\n");
    return 2;
  }
  double *k = malloc(sizeof *k * S * D), *v = malloc(sizeof *v * S * D), *s = malloc(sizeof *s * S);
  if (!k || !v || !s) {
    fprintf(stderr, "fp8_p_error: no memory for S = %d\n", S);
    return 1;
  }
  srand(7);
  for (long i = 0; i < (long)S * D; i++) k[i] = uniform(), v[i] = uniform();
  double *s8 = malloc(sizeof *s8 * S);
  if (!s8) {
    fprintf(stderr, "fp8_p_error: no memory for S = %d\n", S);
    return 1;
  }
  double q[ROWS][D], q_up = 1;
  for (int r = 0; r < ROWS; r++)
    for (int d = 0; d < D; d++) q[r][d] = uniform() * q_gain;
  if (q8) { /* the power of two that puts the rows' largest |q| in [2^7, 2^8) */
    double big = 0;
    for (int r = 0; r < ROWS; r++)
      for (int d = 0; d < D; d++) big = fmax(big, fabs(q[r][d]));
    q_up = ldexp(1.0, 7 - ilogb(big));
  }
  double err2 = 0, ref2 = 0;
  for (int r = 0; r < ROWS; r++) {
    double q_r8[D], o[D] = {0}, o8[D] = {0}, l = 0, l8 = 0, m = -INFINITY, m8 = -INFINITY;
    for (int d = 0; d < D; d++)
      q_r8[d] = q8 ? at_e4m3_to_f32(at_f32_to_e4m3((float)(q[r][d] * q_up))) / q_up : q[r][d];
    for (int j = 0; j < S; j++) {
      double dot = 0, dot8 = 0;
      for (int d = 0; d < D; d++) dot += q[r][d] * k[(long)j * D + d], dot8 += q_r8[d] * k[(long)j * D + d];
      s[j] = dot / sqrt(D), s8[j] = dot8 / sqrt(D);
      m = fmax(m, s[j]), m8 = fmax(m8, s8[j]);
    }
    for (int j = 0; j < S; j++) {
      const double p = exp(s[j] - m), p_in = exp(s8[j] - m8);
      const double p8 = q8 == 2 ? p_in : at_e4m3_to_f32(at_f32_to_e4m3((float)(p_in * p_scale))) / p_scale;
      l += p, l8 += p_in;
      for (int d = 0; d < D; d++) o[d] += p * v[(long)j * D + d], o8[d] += p8 * v[(long)j * D + d];
    }
    for (int d = 0; d < D; d++)
      err2 += (o8[d] / l8 - o[d] / l) * (o8[d] / l8 - o[d] / l), ref2 += o[d] * o[d] / (l * l);
  }
  printf("S %d, P scale %g, Q gain %g: O's relative L2 error with %s %.3e\n", S, p_scale, q_gain,
         q8 == 2 ? "Q in E4M3" : q8 ? "Q and P in E4M3" : "P in E4M3", sqrt(err2 / ref2));
  free(k), free(v), free(s), free(s8);
  return 0;
}
