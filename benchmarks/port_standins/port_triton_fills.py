"""Gaps of triton's CPU interpreter (``TRITON_INTERPRET=1``) that the examples' references hit, filled with compiled
triton's meaning, for the measuring harness only (``benchmarks/tilelang_port.py``; never egtile's code or tests).

Each fill is applied only where a probe shows the gap in the installed triton, and :data:`FILLED` names the ones
applied, so that a file's outcome can say its reference ran on a filled interpreter. Filled (triton 3.8.0):

``bfloat16``
    The interpreter keeps bfloat16 as its raw ``uint16`` bits and runs numpy arithmetic, ``tl.dot`` and comparisons
    on those bits (``tl.dot`` of two bfloat16 blocks of values in [-2, 2] gives ~1e10; upstream: "the interpreter
    mode doesn't support bf16", triton-lang/triton#5424, #11584). Filled: a bfloat16 value is held as a float32
    array whose values are bfloat16 numbers; loads widen the stored bits exactly, stores and every operation whose
    result type is bfloat16 round to nearest even, as the GPU's bfloat16 arithmetic does.
``bfloat16 constants``
    ``get_bf16`` (a Python number next to a bfloat16 block) is missing from the interpreter's builder.
``float arguments``
    A Python ``float`` kernel argument stays a Python number in the interpreter, so ``bf16_block * scale`` is computed
    in bfloat16 with ``scale`` rounded; compiled triton types such an argument ``fp32`` (``mangle_type``), and the
    product is float32. Filled: float arguments are passed as float32 scalars, as compiled.
``builtin aliases``
    A ``triton.language`` builtin bound to a module-level name at import (fla 0.2's ``exp = tl.exp``) is not patched
    by the interpreter, which patches only the ``triton.language`` modules themselves: calling it in a kernel fails
    ("Did you forget to add @triton.jit ?"). Filled: such names in the kernel's module are patched for the launch.
``libdevice``
    ``triton.language.extra.libdevice`` functions are stubs the interpreter never replaces (a call returns ``None``).
    Filled for the ones the references call, with the ``tl.math`` function of the same meaning: ``exp2``,
    ``fast_expf`` (``exp``), ``fast_logf`` (``log``), ``fast_log2f`` (``log2``), ``log2``, ``exp``, ``log``, ``rsqrt``,
    ``sqrt``, ``abs`` and ``floor``.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import torch

FILLED: list[str] = []


def _bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits).astype(np.uint16).astype(np.uint32) << 16).view(np.float32)


def _to_bits(values: np.ndarray) -> np.ndarray:
    t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
    return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def _round(values: np.ndarray) -> np.ndarray:
    """float32 holding the nearest bfloat16 (ties to even) of each value."""
    return _bits_to_f32(_to_bits(values)).reshape(np.shape(values))


def _bf16_arithmetic_broken(interp, tl) -> bool:
    b = interp.InterpreterBuilder()
    one = interp.TensorHandle(np.array([0x3F80], dtype=np.uint16), tl.bfloat16)  # 1.0
    out = b.create_fmul(one, one)
    return not (out.data.dtype == np.uint16 and out.data[0] == 0x3F80) and \
        not (out.data.dtype == np.float32 and out.data[0] == 1.0)


def fill() -> list[str]:
    import triton.language as tl
    import triton.runtime.interpreter as interp

    B = interp.InterpreterBuilder
    TH = interp.TensorHandle

    def is_bf16(ty) -> bool:
        while hasattr(ty, "element_ty"):
            ty = ty.element_ty
        return ty == tl.bfloat16

    # --- bfloat16 held as float32 values that are bfloat16 numbers
    if _bf16_arithmetic_broken(interp, tl) or _probe_dot_broken(interp, tl):
        real_np_dtype = interp._get_np_dtype

        def np_dtype(tt):
            if not isinstance(tt, tl.pointer_type) and is_bf16(tt) and not (
                    isinstance(tt, tl.block_type) and isinstance(tt.element_ty, tl.pointer_type)):
                return np.dtype(np.float32)
            return real_np_dtype(tt)
        interp._get_np_dtype = np_dtype
        real_validate = interp._validate_np_data_size

        def validate(array, tt):
            if not isinstance(tt, tl.pointer_type) and is_bf16(tt):
                return array.dtype == np.float32
            return real_validate(array, tt)
        interp._validate_np_data_size = validate

        real_load, real_store = B.create_masked_load, B.create_masked_store

        def masked_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
            if not is_bf16(ptrs.get_element_ty()):
                return real_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)
            other_bits = np.zeros_like(ptrs.data, dtype=np.uint16) if other is None else \
                np.broadcast_to(_to_bits(other.data), ptrs.data.shape).copy()
            raw = interp._interpreter.load(ptrs.data, mask.data, other_bits, np.dtype(np.uint16))
            return TH(_bits_to_f32(raw).reshape(raw.shape), tl.bfloat16)

        def masked_store(self, ptrs, value, mask, cache_modifier, eviction_policy):
            if not is_bf16(ptrs.get_element_ty()):
                return real_store(self, ptrs, value, mask, cache_modifier, eviction_policy)
            bits = np.broadcast_to(_to_bits(value.data).reshape(np.shape(value.data)), ptrs.data.shape).copy()
            return interp._interpreter.store(ptrs.data, bits, mask.data)

        B.create_masked_load, B.create_masked_store = masked_load, masked_store

        real_cast = B.cast_impl

        def cast_impl(self, src, dst_type):
            src_bf, dst_bf = is_bf16(src.dtype), is_bf16(dst_type)
            if not (src_bf or dst_bf):
                return real_cast(self, src, dst_type)
            if dst_bf:
                return TH(_round(np.asarray(src.data, dtype=np.float64)), tl.bfloat16)
            return TH(np.asarray(src.data, dtype=np.float32).astype(real_np_dtype(dst_type)), dst_type.scalar)
        B.cast_impl = cast_impl  # create_fp_ext / fp_trunc / si_to_fp / ... call self.cast_impl

        real_fp_to_fp = B.create_fp_to_fp

        def fp_to_fp(self, src, dst_type, rounding_mode):
            if is_bf16(src.dtype) or is_bf16(dst_type):
                if not (is_bf16(src.dtype) and is_bf16(dst_type)) and (
                        src.dtype.scalar.primitive_bitwidth == 8 or dst_type.scalar.primitive_bitwidth == 8):
                    raise NotImplementedError("port_triton_fills: fp8 <-> bfloat16 conversion is not filled")
                return self.cast_impl(src, dst_type)
            return real_fp_to_fp(self, src, dst_type, rounding_mode)
        B.create_fp_to_fp = fp_to_fp

        real_bitcast = B.create_bitcast

        def bitcast(self, src, dst_type):
            if is_bf16(src.dtype) and not is_bf16(dst_type):
                return TH(_to_bits(src.data).reshape(np.shape(src.data)).view(real_np_dtype(dst_type)),
                          dst_type.scalar)
            if is_bf16(dst_type) and not is_bf16(src.dtype):
                return TH(_bits_to_f32(np.asarray(src.data).view(np.uint16)).reshape(np.shape(src.data)),
                          tl.bfloat16)
            return real_bitcast(self, src, dst_type)
        B.create_bitcast = bitcast

        def rounding(real, result_dtype):
            def op(self, *args):
                out = real(self, *args)
                if is_bf16(result_dtype(args)) and np.asarray(out.data).dtype.kind == "f":
                    return TH(_round(out.data), out.dtype)
                return out
            return op
        B.binary_op = rounding(B.binary_op, lambda a: a[0].dtype)
        B.ternary_op = rounding(B.ternary_op, lambda a: a[2].dtype)
        B.unary_op = rounding(B.unary_op, lambda a: a[0].dtype)
        B.create_fma = rounding(B.create_fma, lambda a: a[2].dtype)
        B.create_dot = rounding(B.create_dot, lambda a: a[2].dtype)

        def fabs(self, arg):
            if is_bf16(arg.dtype):
                return TH(np.abs(arg.data), arg.dtype.scalar)
            return real_fabs(self, arg)
        real_fabs = B.create_fabs
        B.create_fabs = fabs
        FILLED.append("bfloat16")

    if not hasattr(B, "get_bf16"):
        B.get_bf16 = lambda self, value: TH(_round(np.array([value], dtype=np.float64)), tl.bfloat16)
        FILLED.append("bfloat16 constants")

    # --- float kernel arguments are fp32 scalars, as compiled triton types them
    real_cvt = interp._implicit_cvt
    if real_cvt(0.5) == 0.5:
        def implicit_cvt(arg):
            if isinstance(arg, float):
                return tl.tensor(TH(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
            return real_cvt(arg)
        interp._implicit_cvt = implicit_cvt
        FILLED.append("float arguments")

    # --- triton.language builtins bound to another name at import (fla's `exp = tl.exp`): the interpreter patches
    # the triton.language modules a kernel sees, not such aliases, so calling one inside a kernel fails ("Did you
    # forget to add @triton.jit ?"); patched in the kernel's module for the launch, as the modules are
    if _aliases_unpatched(interp, tl):
        real_patch_lang = interp._patch_lang

        def patch_lang(fn):
            scope = real_patch_lang(fn)
            module = sys.modules.get(getattr(fn, "__module__", None) or "")
            if module is not None and module.__dict__ is getattr(fn, "__globals__", None):
                for name, value in list(module.__dict__.items()):
                    if tl.core.is_builtin(value):
                        interp._patch_attr(module, name, value, interp.interpreter_builder, scope)
            return scope
        interp._patch_lang = patch_lang
        FILLED.append("builtin aliases")

    # --- libdevice functions the references call, as the tl.math function of the same meaning
    import triton.language.extra.libdevice as libdevice
    same = {"exp2": "exp2", "fast_expf": "exp", "fast_logf": "log", "fast_log2f": "log2", "log2": "log2",
            "exp": "exp", "log": "log", "rsqrt": "rsqrt", "sqrt": "sqrt", "abs": "abs", "floor": "floor"}
    stubs = [n for n in same if getattr(libdevice, n, None) is not None and
             getattr(getattr(libdevice, n), "__code__", None) is not None and
             getattr(libdevice, n).__code__.co_code == _stub.__code__.co_code]
    for name in stubs:
        target = same[name]
        setattr(libdevice, name, (lambda t: lambda x, *a, **k: getattr(tl.math, t)(x))(target))
    if stubs:
        FILLED.append("libdevice")
    return FILLED


def _aliases_unpatched(interp, tl) -> bool:
    module = types.ModuleType("port_triton_fills_probe")
    original = tl.exp
    module.tl, module.alias = tl, original
    sys.modules[module.__name__] = module
    try:
        exec("def f():\n    return alias\n", module.__dict__)
        scope = interp._patch_lang(module.f)
        patched = module.alias is not original
        scope.restore()
        return not patched
    finally:
        del sys.modules[module.__name__]


def _stub(arg0):
    ...


def _probe_dot_broken(interp, tl) -> bool:
    b = interp.InterpreterBuilder()
    one = interp.TensorHandle(np.full((1, 1), 0x3F80, dtype=np.uint16), tl.bfloat16)
    acc = interp.TensorHandle(np.zeros((1, 1), dtype=np.float32), tl.float32)
    out = b.create_dot(one, one, acc, None, None)
    return float(out.data[0, 0]) != 1.0
