"""C identifiers of user names (codegen/names.py, issue 9 item 3): an injective, collision-free mapping.

NVRTC runs here (no GPU needed); the generated code is also checked structurally and the simulator and the
interpreter run the same kernels against a torch reference.
"""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import egtile
from egtile import language as T
from egtile.codegen import nvrtc
from egtile.codegen.names import RESERVED, check_injective, decode, encode, ident, kernel_scope
from egtile.codegen import build
from egtile.ir import BinOp, Buffer, Kernel, Leaf, Load, Scheduled, Store, ThreadLoop, ThreadRange, UnOp, Var

C_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)


def _valid_c(code: str) -> bool:
    return bool(C_IDENT.match(code)) and "__" not in code and code not in RESERVED


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@given(st.sets(names, max_size=30))
@settings(max_examples=300, deadline=None)
def test_ident_is_injective_and_always_a_valid_unreserved_c_identifier(ns):
    mapping = check_injective(ns, "property test")
    assert len(set(mapping.values())) == len(ns)
    for n, code in mapping.items():
        assert _valid_c(code), (n, code)


@given(names)
@settings(max_examples=300, deadline=None)
def test_encoding_round_trips(n):
    code = encode(n)
    assert decode(code) == n
    assert not code.startswith("_") and "__" not in code


@given(st.sets(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True), max_size=20),
       st.sets(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True), max_size=5))
@settings(max_examples=200, deadline=None)
def test_per_kernel_reserved_names_are_avoided_and_injectivity_holds(ns, extra):
    with kernel_scope(extra, ns, "property test") as mapping:
        assert not set(mapping.values()) & set(extra)
        assert len(set(mapping.values())) == len(mapping)


def test_examples_of_the_mapping():
    assert ident("A_shared") == "A_shared"  # plain names read as written
    assert ident("rá") == "u_rZe1_" and ident("ré") == "u_rZe9_"
    assert ident("expf") == "u_expf" and ident("half") == "u_half" and ident("float") == "u_float"
    assert ident("u_x") == "u_uZ5f_x"  # cannot meet an encoded name
    assert ident("a__b") == "u_aZ5f_Z5f_b" and ident("_a") == "u_Z5f_a"
    for reserved in ("expf", "logf", "exp2f", "sqrtf", "rsqrtf", "fminf", "fmaxf", "floorf", "fmodf", "sinf", "cosf",
                     "tanhf", "log2f", "min", "max", "threadIdx", "blockIdx", "smem", "main", "CUtensorMap",
                     "nv_bfloat16", "eg_tid", "EG_TMA_TMAP", "CUDART_INF_F", "warpSize", "make_float2", "float4"):
        assert ident(reserved) != reserved, reserved


def _rr_kernel():
    @T.prim_func
    def main(X: T.Tensor((4, 4), "float32"), Y: T.Tensor((4, 4), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            for rá in T.serial(4):
                for ré in T.serial(4):
                    Y[rá, ré] = X[rá, ré] + rá * 10

    return main


def test_non_ascii_loop_variables_stay_distinct_in_cuda_and_agree_on_cpu():
    f = _rr_kernel()
    k = egtile.compile(f, target="cuda")
    src = k.get_kernel_source()
    # The two loops declare different identifiers and the store reads both (NVRTC accepted the source).
    loops = re.findall(r"for \(int (\w+) = ", src)
    assert "u_rZe1_" in loops and "u_rZe9_" in loops, loops
    store = next(line for line in src.splitlines() if line.strip().startswith("Y["))
    assert "u_rZe1_" in store and "u_rZe9_" in store, store
    assert k._built.cubin[:4] == b"\x7fELF"
    x = torch.randn(4, 4)
    ref = x + torch.arange(4, dtype=torch.float32).reshape(4, 1) * 10
    for target in ("sim", "interp"):
        y = torch.full((4, 4), float("nan"))
        egtile.compile(f, target=target)(x, y)
        assert torch.equal(y, ref), target


def test_non_ascii_parameters_and_buffers_compile():
    @T.prim_func
    def main(á: T.Tensor((64,), "float32"), é: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            Sá = T.alloc_shared((64,), "float32")
            Sé = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                Sá[i] = á[i] * 2.0
            for i in T.Parallel(64):
                Sé[i] = Sá[i] + 1.0
            for i in T.Parallel(64):
                é[i] = Sé[i]

    k = egtile.compile(main, target="cuda")
    src = k.get_kernel_source()
    assert "float* u_Ze1_" in src and "float* u_Ze9_" in src
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    egtile.compile(main, target="sim")(x, y)
    assert torch.equal(y, x * 2.0 + 1.0)


def test_a_parameter_named_like_a_math_function_used_with_that_function():
    @T.prim_func
    def main(expf: T.Tensor((64,), "float32"), logf: T.Tensor((64,), "float32"), fminf: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            for i in T.Parallel(64):
                fminf[i] = T.min(T.exp(expf[i]) + T.log(logf[i]), T.sqrt(logf[i]))

    k = egtile.compile(main, target="cuda")  # NVRTC used to fail: "expression preceding parentheses ..."
    assert "float* u_expf" in k.get_kernel_source()
    a, b = torch.randn(64), torch.rand(64) + 0.5
    y = torch.full((64,), float("nan"))
    egtile.compile(main, target="sim")(a, b, y)
    torch.testing.assert_close(y, torch.minimum(torch.exp(a) + torch.log(b), torch.sqrt(b)))


def test_a_buffer_named_like_an_extern_of_the_same_kernel():
    src = 'extern "C" __device__ void bump(float* p) { *p += 1.0f; }'

    @T.prim_func
    def main(bump: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            T.import_source(src)
            for i in T.Parallel(32):
                T.call_extern("void", "bump", T.address_of(bump[i]))

    k = egtile.compile(main, target="cuda")
    assert "float* u_bump" in k.get_kernel_source()


def _pipelined():
    @T.prim_func
    def main(X: T.Tensor((32, 192), "float16"), Y: T.Tensor((32, 192), "float16")):
        with T.Kernel(2, threads=128) as bx:
            X_shared = T.alloc_shared((16, 64), "float16")
            for ko in T.Pipelined(3, num_stages=2):
                T.copy(X[bx * 16, ko * 64], X_shared)
                for i, j in T.Parallel(16, 64):
                    Y[bx * 16 + i, ko * 64 + j] = X_shared[i, j] * 3.0

    return main


def _code_tokens(text: str) -> set[str]:
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\])*"', " ", text)
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def test_every_identifier_egtile_emits_or_includes_is_safe_as_a_user_name():
    """Every identifier of egtile's headers and of generated kernels that a user name would keep (not
    renamed) is used as a parameter and loop-variable name of one kernel that calls every math function
    the backend emits; NVRTC must compile it."""
    from egtile.mathfns import MATH  # the table of emitted math functions

    texts = [nvrtc.header_texts(), egtile.compile(_pipelined(), target="cuda").get_kernel_source(),
             egtile.compile(_rr_kernel(), target="cuda").get_kernel_source()]
    tokens = set().union(*(_code_tokens(t) for t in texts))
    keepable = sorted(t for t in tokens if ident(t) == t and t not in ("i", "bx", "Src", "Out"))
    assert keepable, "expected some header-local names (function parameters) that users may keep"
    n = 32
    ops = sorted(name for name, fn in MATH.items() if fn.arity == 1 and not fn.predicate)

    def uses(k: int, p: Buffer, v: Var):
        x = Load(p, (v,))
        return BinOp("min", BinOp("max", UnOp(ops[k % len(ops)], x), x), BinOp("//", x, BinOp("%", x, x)))

    def loop(k: int, v: Var, p: Buffer, out: Buffer):
        return ThreadLoop((v,), (n,), "partitioned", ThreadRange(0, 32), (Leaf(Store(k + 1, out, (v,), uses(k, p, v))),))

    def build_kernel(name, params, loops):
        kernel = Kernel(name, params, (1,), (Var("bx"),), 32, (), ())
        return build(Scheduled(kernel, 32, (), (), tuple(loops))).cubin

    # 1. every keepable token as a parameter name, 2. as a loop variable name
    params = [Buffer(t, (n,), "float32", "global") for t in keepable]
    out = Buffer("Out", (n,), "float32", "global")
    assert build_kernel("probe1", (*params, out), [loop(k, Var("i"), p, out) for k, p in enumerate(params)])[:4] \
        == b"\x7fELF"
    src = Buffer("Src", (n,), "float32", "global")
    loops = [loop(k, Var(t), src, out) for k, t in enumerate(keepable)]
    assert build_kernel("probe2", (src, out), loops)[:4] == b"\x7fELF"



def test_a_loop_variable_named_like_a_buffer_gets_its_own_c_name():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            src = A
            for A in T.Parallel(64):  # noqa: B020 - rebinding the parameter's Python name on purpose
                B[A] = src[A] * 2.0

    names = {p.name for p in main.kernel.params} | {s.var.name for s in main.kernel.body}
    assert len(names) == 3  # the loop variable is A_1, not A
    k = egtile.compile(main, target="cuda")
    assert k._built.cubin[:4] == b"\x7fELF"
    x = torch.randn(64)
    y = torch.full((64,), float("nan"))
    egtile.compile(main, target="sim")(x, y)
    assert torch.equal(y, x * 2.0)


def test_a_hand_built_schedule_with_a_variable_named_like_a_buffer_is_refused():
    from egtile.errors import CodegenError

    x = Buffer("x", (4,), "float32", "global")
    k = Kernel("clash", (x,), (1,), (Var("bx"),), 32, (), ())
    s = Scheduled(k, 32, (), (), (ThreadLoop((Var("x"),), (4,), "partitioned", ThreadRange(0, 32), ()),))
    with pytest.raises(CodegenError, match="names both a buffer and a variable"):
        build(s)
