// egtile_rng.cuh: curand's Philox4_32_10 stream per thread (T.rng_init / T.rng_rand), the definition of
// egtile/rng.py in CUDA C++. Included by a kernel that calls eg_rng_init / eg_rng_rand (codegen/emit.py).
//
// State: 11 words of the thread's own buffer: counter c[0..3] (lowest first), key k[4..5], the counter's output
// o[6..9], the index of the next word s[10] (curandStatePhilox4_32_10_t's ctr, key, output, STATE).
// Philox4x32-10 (Salmon et al., SC 2011; Random123): 10 rounds of two 32x32->64 products, key bumped between rounds.
#pragma once

__device__ __forceinline__ void eg_philox4x32_10(const unsigned int* c, unsigned int k0, unsigned int k1,
                                                 unsigned int* out) {
  unsigned int c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

// curand_init(seed, subsequence, offset, &state): key = seed's halves; the counter's high 64 bits += subsequence
// (carry out dropped), the 128-bit counter += offset / 4; the first draw is word offset % 4.
__device__ __forceinline__ void eg_rng_init(unsigned int* s, unsigned long long seed, unsigned long long subsequence,
                                            unsigned long long offset) {
  const unsigned long long lo = offset / 4ull;
  const unsigned long long hi = subsequence;
  s[0] = (unsigned int)lo;
  s[1] = (unsigned int)(lo >> 32);
  s[2] = (unsigned int)hi;
  s[3] = (unsigned int)(hi >> 32);
  s[4] = (unsigned int)seed;
  s[5] = (unsigned int)(seed >> 32);
  eg_philox4x32_10(s, s[4], s[5], s + 6);
  s[10] = (unsigned int)(offset % 4ull);
}

// curand(&state): the next word; after the fourth, the next counter (+1 on 128 bits) and its output.
__device__ __forceinline__ void eg_rng_rand(unsigned int* s, unsigned int* out) {
  const unsigned int i = s[10];
  *out = s[6 + i];
  if (i == 3u) {
    if (++s[0] == 0u && ++s[1] == 0u && ++s[2] == 0u) ++s[3];
    eg_philox4x32_10(s, s[4], s[5], s + 6);
    s[10] = 0u;
  } else {
    s[10] = i + 1u;
  }
}
