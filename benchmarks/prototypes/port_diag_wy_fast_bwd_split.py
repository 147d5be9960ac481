"""Is TileLang's gdn/example_wy_fast_bwd_split.py off in dbeta because of egtile or because of the example?
(docs/porting-tilelang.md, 2026-12-06.) Ports the example's folder into /tmp/diag2 by import change (never
committed), runs both of its kernels on the simulator at one head of 128 tokens, and compares dbeta, as the example
forms it (two bfloat16 partials added in bfloat16 on the host), the same partials added in float64, and fla's
reference (at commit f03cb3ae, on triton's CPU interpreter with the port script's fills) with the same algorithm
(fla's prepare_wy_repr_bwd_kernel) computed in float64 from the same inputs.

    PYTHONPATH=/work/fla python benchmarks/prototypes/port_diag_wy_fast_bwd_split.py
"""
import os
import pathlib
import sys

os.environ["TRITON_INTERPRET"] = "1"
here = pathlib.Path(__file__).resolve().parents[1]
sys.path.append(str(here))  # appended: benchmarks/kernels.py would shadow a library module of that name
sys.path.append(str(here / "port_standins"))
import port_triton_fills  # noqa: E402
import tilelang_port as tp  # noqa: E402
import torch  # noqa: E402

port_triton_fills.fill()
import triton.runtime.autotuner as _tat  # noqa: E402 (no driver to time configurations: keep the first, as the port script)

_prune = _tat.Autotuner.prune_configs
_tat.Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]
torch.Tensor.cuda = lambda self, *a, **k: self
torch.cuda.synchronize = lambda *a, **k: None
src, dst = pathlib.Path("/work/tl/examples/gdn"), pathlib.Path("/tmp/diag2")
for f in src.glob("*.py"):
    (dst / f.name).write_text(tp.port(f.read_text()))
sys.path.insert(0, str(dst))
from fla.ops.gated_delta_rule.wy_fast import bwd_prepare_wy_repr  # noqa: E402,F401 (the import the example guards)
import example_wy_fast_bwd_split as ex  # noqa: E402
from egtile import language as T  # noqa: E402

B, S, H, DK, DV, BT = 1, 128, 1, 128, 128, 64
torch.manual_seed(0)
K, V, Beta, G, A, dw, du = ex.prepare_input(B, S, H, DK, DV, BT, torch.bfloat16, torch.bfloat16, torch.float32,
                                            torch.float32, torch.float32)
dk_ref, dv_ref, dbeta_ref, dg_ref = ex.bwd_prepare_wy_repr(K, V, G, Beta, A, dw, du, cu_seqlens=None)
args = (B, S, H, DK, DV, T.bfloat16, T.bfloat16, T.float32, T.float32, T.float32, BT, 32, 32, 128, 0)
dA_t, dk_t, dv_t, dbeta_t, dg_t = ex.tilelang_wy_fast_bwd(*args)(K, V, Beta, G, A, dw, du)
dbeta_k = torch.empty(B, S, H, dtype=torch.bfloat16)
dg_pos, dg_neg = (torch.empty(B, S, H, BT, dtype=torch.float32) for _ in range(2))
ex.tilelang_wy_fast_bwd_split(*args)(K, V, Beta, G, A, dw, du, dA_t, dk_t, dv_t, dbeta_k, dg_pos, dg_neg)


def f64_dbeta():
    """fla's prepare_wy_repr_bwd_kernel, chunk by chunk, in float64 (no bfloat16 roundings in between)."""
    out = torch.zeros(B, S, H, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for t in range(0, S, BT):
                r = slice(t, t + BT)
                k, v = K[b, r, h].double(), V[b, r, h].double()
                beta, g = Beta[b, r, h].double(), G[b, r, h].double()
                At = A[b, r, h].double().T  # the kernel loads A transposed
                w_, u_ = dw[b, r, h].double(), du[b, r, h].double()
                ge = g.exp()
                dkbg = At @ w_
                dbeta = (dkbg * k * ge[:, None]).sum(1)
                dA = w_ @ (k * beta[:, None] * ge[:, None]).T
                dvb = At @ u_
                dbeta += (dvb * v).sum(1)
                dA += u_ @ (v * beta[:, None]).T
                low = torch.tril(torch.ones(BT, BT, dtype=torch.bool), -1)
                dA = torch.where(low, dA, 0)
                dA = At @ (dA @ At)
                dA = torch.where(low, -dA, 0)
                diff = g[:, None] - g[None, :]
                dA = dA * torch.where(diff <= 0, diff, float("-inf")).exp()
                dbeta += ((dA @ k) * k).sum(1)
                out[b, r, h] = dbeta
    return out


def ratio(x, y):
    d = x.double() - y.double()
    return (d.square().mean().sqrt() / y.double().square().mean().sqrt()).item()


def one_minus_sim(x, y):
    x, y = x.double(), y.double()
    return (1 - 2 * (x * y).sum() / (x * x + y * y).sum()).item()


ref64 = f64_dbeta()
for name, x in (("fla's reference (bfloat16 output)", dbeta_ref), ("egtile, as the example adds it (bfloat16 + bfloat16)",
                dbeta_k + dbeta_t), ("egtile, the same partials added in float64", dbeta_k.double() + dbeta_t.double())):
    print(f"{name}: error ratio vs float64 {ratio(x, ref64):.2e}, 1 - similarity {one_minus_sim(x, ref64):.2e}")
print(f"the example's own check: 1 - similarity(fla, egtile as added) = {one_minus_sim(dbeta_ref, dbeta_k + dbeta_t):.2e} "
      "(its eps 1e-5)")
