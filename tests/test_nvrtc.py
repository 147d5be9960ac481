"""egtile.codegen.nvrtc: NVRTC compilation, include discovery, and compile errors that quote the
generated lines (no GPU needed)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from egtile.codegen import build, nvrtc
from egtile.errors import CompileError, SourceLoc
from egtile.ir import Leaf

from seed_schedules import bug1_schedule


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("EGTILE_DISABLE_CACHE", "1")


def test_cuda_headers_come_from_the_pip_package():
    d = nvrtc.cuda_include_dir()
    assert d is not None and (d / "cuda_fp16.h").is_file() and (d / "cuda_bf16.h").is_file()


def test_options_target_sm90a():
    assert nvrtc.options()[0] == "--gpu-architecture=sm_90a"
    assert nvrtc.nvrtc_version() >= (12, 0)


def test_compiles_a_small_program_to_an_elf_cubin():
    out = nvrtc.compile_cuda('#include "egtile_sync.cuh"\nextern "C" __global__ void k(float* x) '
                             '{ eg_fence_proxy_async_shared(); x[threadIdx.x] = 1.0f; }\n', "k.cu")
    assert out.cubin[:4] == b"\x7fELF"
    assert out.log == ""


def test_setmaxnreg_is_honoured_in_the_seed_kernels():
    # ptxas warns C7508 when it ignores setmaxnreg (no register cap at entry)
    assert "C7508" not in build(bug1_schedule()).log


def _with_sources(s, sources):
    return replace(s, kernel=replace(s.kernel, sources=sources))


def test_broken_extern_source_raises_compile_error_quoting_the_generated_line():
    s = bug1_schedule()
    bad = 'extern "C" __device__ void atomic_inc(int* ptr) { atomicAdd(ptr, 1) /* no semicolon */ }\n'
    with pytest.raises(CompileError) as e:
        build(_with_sources(s, (bad,)))
    msg = str(e.value)
    assert "NVRTC could not compile main_kernel.cu for sm_90a" in msg
    assert "atomicAdd(ptr, 1) /* no semicolon */" in msg  # the offending generated line, quoted
    assert "> " in msg and "generated line" in msg
    assert "error" in msg.split("NVRTC log:")[1]  # and the NVRTC log itself


def test_error_in_a_generated_statement_points_at_the_users_line():
    s = bug1_schedule()
    loc = SourceLoc("seed_bug1.py", 57, 'T.call_extern("void", "atomic_incc", T.address_of(counters[i]))')
    split = s.body[2]
    consumer = split.roles[0]
    loop = consumer.body[0]
    tloop = loop.body[1]
    ext = tloop.body[0].stmt
    typo = replace(ext, name="atomic_incc", loc=loc)
    new_t = replace(tloop, body=(Leaf(typo),))
    new_loop = replace(loop, body=(loop.body[0], new_t, loop.body[2]))
    new_split = replace(split, roles=(replace(consumer, body=(new_loop,)), split.roles[1]))
    kernel = s.kernel
    # the tile-IR statement with sid 5 carries the user's line
    from egtile.ir import For

    pipelined = kernel.body[1]
    par = pipelined.body[1]
    kbody = (kernel.body[0], replace(pipelined, body=(pipelined.body[0], replace(par, body=(typo,)))),
             kernel.body[2])
    sched = replace(s, kernel=replace(kernel, body=kbody), body=s.body[:2] + (new_split,) + s.body[3:])
    assert isinstance(pipelined, For)
    with pytest.raises(CompileError) as e:
        build(sched)
    msg = str(e.value)
    assert "atomic_incc((&counters[i]));  // sid 5" in msg
    assert "generated from seed_bug1.py:57" in msg
    assert "atomic_incc" in msg.split("NVRTC log:")[1]
