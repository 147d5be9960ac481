"""egtile_common.cuh's scalar helpers, compiled for the host with g++, compute what egtile.evaluate computes.

The backend's floor division and modulo, min/max, shifts and math helpers are C++ formulas; compiling the
very header on the CPU (device qualifiers defined away, no FMA contraction as NVRTC's ``--fmad=false``)
and running them on random float32 and int32 inputs checks, bit for bit and without a GPU, that the
formulas are the oracle's. The math helpers (``eg_exp`` ...) are CUDA's float32 functions, which only the
GPU has: the ``gpu`` test in test_arithmetic.py bounds their ulp distance to the oracle.
"""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest

from egtile.codegen.nvrtc import INCLUDE_DIR
from egtile.evaluate import _binop, math_value, round_to

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for the host build of the header")

_STUBS = {
    "cuda_fp16.h": "#pragma once\nstruct half { float x; };\n",
    "cuda_bf16.h": "#pragma once\nstruct __nv_bfloat16 { float x; };\n",
}

_PRELUDE = r"""
#define __device__
#define __forceinline__ inline
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdint>
using std::exp; using std::exp2; using std::log; using std::log2; using std::sin; using std::cos; using std::tanh;
using std::sqrt; using std::floor; using std::fmod;
// The math helpers call CUDA's float32 functions; these host stand-ins only let the header compile.
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
static inline float __int_as_float(int i) { float x; std::memcpy(&x, &i, 4); return x; }
static inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
static inline double __longlong_as_double(long long i) { double x; std::memcpy(&x, &i, 8); return x; }
static inline unsigned __cvta_generic_to_shared(const void*) { return 0; }
#include "egtile_common.cuh"
"""

_MAIN = r"""
int main() {
  int n; if (std::fread(&n, 4, 1, stdin) != 1) return 1;
  float* a = new float[n]; float* b = new float[n]; int* s = new int[n]; int* x = new int[n];
  if (std::fread(a, 4, n, stdin) != (size_t)n || std::fread(b, 4, n, stdin) != (size_t)n) return 1;
  if (std::fread(x, 4, n, stdin) != (size_t)n || std::fread(s, 4, n, stdin) != (size_t)n) return 1;
  for (int i = 0; i < n; ++i) {
    float out[8] = {eg_floordiv(a[i], b[i]), eg_floormod(a[i], b[i]), eg_rem(a[i], b[i]), eg_min<float>(a[i], b[i]),
                    eg_max<float>(a[i], b[i]), eg_sqrt(a[i]), a[i] * b[i] + a[i], eg_abs(a[i])};
    int iout[3] = {eg_shl(x[i], (long long)s[i]), eg_shr(x[i], (long long)s[i]),
                   (int)eg_shr((unsigned)x[i], (long long)s[i])};
    std::fwrite(out, 4, 8, stdout); std::fwrite(iout, 4, 3, stdout);
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def helper_binary(tmp_path_factory):
    d = tmp_path_factory.mktemp("hosthdr")
    for name, text in _STUBS.items():
        (d / name).write_text(text)
    (d / "main.cpp").write_text(_PRELUDE + _MAIN)
    exe = d / "helpers"
    subprocess.run(["g++", "-std=c++17", "-O2", "-ffp-contract=off", "-fno-fast-math", f"-I{d}", f"-I{INCLUDE_DIR}",
                    str(d / "main.cpp"), "-o", str(exe)], check=True, capture_output=True)
    return exe


def _f32(v: float) -> int:
    return int(np.float32(v).view(np.int32)) if not math.isnan(v) else 0x7FC00000


def _model(a: float, b: float, x: int, s: int) -> list[int]:
    fl = [_binop("//", a, b, "float", "float32"), _binop("floormod", a, b, "float", "float32"),
          _binop("%", a, b, "float", "float32"), _binop("min", a, b, "float", "float32"),
          _binop("max", a, b, "float", "float32")]
    fl += [math_value("sqrt", a, "float32")]
    fl += [round_to("float32", round_to("float32", a * b) + a), abs(a)]
    ints = [round_to("int32", _binop("<<", x, s, "int")), round_to("int32", _binop(">>", x, s, "int")),
            round_to("int32", round_to("uint32", _binop(">>", round_to("uint32", x), s, "int")))]
    return [_f32(round_to("float32", v)) for v in fl] + ints


def test_header_helpers_on_the_host_equal_the_oracle(helper_binary):
    rng = np.random.default_rng(1234)
    n = 4000
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 0.1, 0.2, 0.3, 3.0, -1e-45, 1e-40, 3e38],
                       dtype=np.float32)
    parts = [rng.standard_normal(n).astype(np.float32) * np.float32(10.0) ** rng.integers(-3, 4, n).astype(np.float32),
             (rng.integers(-20, 20, n) * np.float32(0.1)).astype(np.float32), rng.choice(special, n)]
    a = np.choose(rng.integers(0, 3, n), parts).astype(np.float32)
    b = np.choose(rng.integers(0, 3, n), [p[rng.permutation(n)] for p in parts]).astype(np.float32)
    x = rng.integers(-(2 ** 31), 2 ** 31, n).astype(np.int32)
    s = np.choose(rng.integers(0, 2, n), [rng.integers(0, 32, n), rng.integers(-(2 ** 31), 2 ** 31, n)]).astype(np.int32)
    payload = np.int32(n).tobytes() + a.tobytes() + b.tobytes() + x.tobytes() + s.tobytes()
    out = subprocess.run([str(helper_binary)], input=payload, capture_output=True, check=True).stdout
    got = np.frombuffer(out, dtype=np.int32).reshape(n, 11).copy()
    fl = got[:, :8].view(np.float32)
    got[:, :8][np.isnan(fl)] = 0x7FC00000
    names = ["//", "floormod", "fmod", "min", "max", "sqrt", "a*b+a", "abs", "<<", ">>", ">>u"]
    bad = []
    for i in range(n):
        want = _model(float(a[i]), float(b[i]), int(x[i]), int(s[i]))
        for k, (g, w) in enumerate(zip(got[i], want)):
            if int(g) != w:
                bad.append(f"{names[k]}(a={a[i]!r}, b={b[i]!r}, x={x[i]}, s={s[i]}): host {int(g):#x} vs oracle {w:#x}")
    assert not bad, f"{len(bad)} mismatches, e.g.\n" + "\n".join(bad[:10])
