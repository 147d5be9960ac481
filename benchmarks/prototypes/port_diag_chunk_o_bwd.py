"""Is TileLang's gdn/example_chunk_o_bwd.py off because of egtile's schedule or because of the program itself?
(docs/porting-tilelang.md, 2026-12-06.) Ports the example's folder into /tmp/diag3 by import change (never committed),
runs its kernel at one head of 128 tokens on each target given (interp: the tile program's meaning, unscheduled;
sim: the scheduled kernel on the simulator) and prints 1 - similarity of dq, dk, dw, dg against fla's reference
(commit f03cb3ae, on triton's CPU interpreter with the port script's fills) and between the targets.

    cd /tmp/diag3 && PYTHONPATH=/work/fla python /work/main/benchmarks/prototypes/port_diag_chunk_o_bwd.py interp sim
"""
import os, pathlib, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path.append("/work/main/benchmarks"); sys.path.append("/work/main/benchmarks/port_standins")
import port_triton_fills; port_triton_fills.fill()
import triton.runtime.autotuner as _tat
_p = _tat.Autotuner.prune_configs; _tat.Autotuner.prune_configs = lambda self, kw: _p(self, kw)[:1]
import tilelang_port as tp, torch
torch.Tensor.cuda = lambda self, *a, **k: self
torch.cuda.synchronize = lambda *a, **k: None
src, dst = pathlib.Path("/work/tl/examples/gdn"), pathlib.Path("/tmp/diag3")
dst.mkdir(exist_ok=True)
for f in src.glob("*.py"):
    (dst / f.name).write_text(tp.port(f.read_text()))
sys.path.insert(0, str(dst))
from fla.ops.common.chunk_o import chunk_bwd_dqkwg  # noqa (the example guards it)
import example_chunk_o_bwd as ex
import egtile
from egtile import language as T
B, S, H, DK, DV, BT = 1, 128, 1, 128, 128, 64
scale = DK ** -0.5
Q, K, V, h, G, dO, dh, dv, W = ex.prepare_input(B, S, H, DK, DV, BT, torch.bfloat16, torch.bfloat16, torch.float32, torch.float32, torch.float32)
ref = ex.chunk_bwd_dqkwg(Q, K, V, G, dO, h, dh, dv, W, chunk_size=BT, scale=scale)
kern = ex.tilelang_chunk_o_bwd_dqkwg(B, S, H, DK, DV, T.bfloat16, T.bfloat16, T.float32, T.float32, T.float32, BT, scale, True, True, 64, 64, 256, 0)
outs = {}
for target in sys.argv[1:]:
    k = egtile.api.JITKernel(kern.kernel, kern.out_idx, target) if target != "sim" else kern
    r = k(Q, K, V, h, G, dO, dh, dv, W)
    r = list(r); r[3] = r[3].sum(dim=0)
    outs[target] = r
def sim(x, y):
    x, y = x.double().nan_to_num(), y.double().nan_to_num()
    return 1 - (2 * (x * y).sum() / (x * x + y * y).sum()).item()
names = ["dq", "dk", "dw", "dg"]
for t, r in outs.items():
    print(t, {n: f"{sim(a, b):.2e}" for n, a, b in zip(names, r, ref)}, "nan:", [int(torch.isnan(a.double()).sum()) for a in r])
if len(outs) == 2:
    a, b = outs.values()
    print("between targets", {n: f"{sim(x, y):.2e}" for n, x, y in zip(names, a, b)})
