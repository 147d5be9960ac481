"""Is TileLang's dsa_sparse_finetune/indexer_topk_reducesum.py off because of egtile or because of its reference?
(docs/porting-tilelang.md, 2026-12-06.) Ports the example's folder into /tmp/diag by import change (never
committed), runs its kernel on the simulator at 64 tokens, 8 heads of dim 64, topk 32, and compares both the kernel's
and the example's own bfloat16 reference's top-k scores with the same reference computed in float64 (the selected
keys with a positive score, and FLA's error ratio of their scores).

    python benchmarks/prototypes/port_diag_indexer_topk.py  # with /work/tl/examples holding TileLang's examples
"""
import sys, pathlib, torch, importlib
sys.path.insert(0, "/work/main/benchmarks")
import tilelang_port as tp
src = pathlib.Path("/work/tl/examples/dsa_sparse_finetune")
for f in [p.name for p in src.glob("*.py")]:
    (pathlib.Path("/tmp/diag") / f).write_text(tp.port((src / f).read_text()))
sys.path.insert(0, "/tmp/diag")
m = importlib.import_module("indexer_topk_reducesum")
import utils
torch.manual_seed(0)
S, H, D, topk = 64, 8, 64, 32
q = torch.randn((S, H, D)).bfloat16(); w = torch.randn((S, H)).bfloat16(); k = torch.randn((S, D)).bfloat16()
offsets = torch.tensor([0, S], dtype=torch.int32)
ref_i, ref_s = m.ref_index_score(q, w, k, topk, offsets)
i64, s64 = m.ref_index_score(q.double(), w.double(), k.double(), topk, offsets)
ti, ts = m.indexer_topk_reducesum_interface(q, w, k, topk, offsets)
def ratio(x, y): return ((x.double() - y.double()).square().mean().sqrt() / y.double().square().mean().sqrt()).item()
def pos(i, sc):
    return {int(a): float(b) for a, b in zip(i.tolist(), sc.double().tolist()) if b > 0}
rb, re, diff_ref, diff_eg = [], [], 0, 0
for j in range(S):
    t64 = pos(i64[j], s64[j])
    for (ii, ss, out) in ((ref_i[j], ref_s[j], rb), (ti[j], ts[j], re)):
        d = pos(ii, ss)
        if set(d) != set(t64):
            out.append(float("nan")); continue
        x = torch.tensor([d[c] for c in sorted(t64)], dtype=torch.float64); y = torch.tensor([t64[c] for c in sorted(t64)], dtype=torch.float64)
        out.append(((x - y).square().mean().sqrt() / y.square().mean().sqrt()).item())
import math
for name, r in (("bf16 reference", rb), ("egtile", re)):
    ok = [x for x in r if not math.isnan(x)]
    print(f"{name} vs float64: max ratio {max(ok):.2e}, tokens over 0.005: {sum(x > 0.005 for x in ok)}, selected sets differ: {sum(math.isnan(x) for x in r)} of {S}")
