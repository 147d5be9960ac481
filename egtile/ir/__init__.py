"""egtile's IR: the tile-level kernel (:mod:`.kernel`) and the scheduled kernel (:mod:`.scheduled`)."""

from egtile.ir.dtypes import DTYPES, DType, canonical, dtype
from egtile.ir.kernel import (
    POINTER_READ, POINTER_WRITE, AddressOf, AtomicAdd, BinOp, Buffer, Cast, Const, Copy, Expr, Extern, Fill, For,
    Gemm, If, Kernel, Layout, Load, LoopKind, Overlay, Reduce, Region, Scope, Select, Stmt, Store, UnOp, Var, walk,
)
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Decision, Elect, FenceProxyAsync, Leaf, MBarrier, Role, RoleSplit,
    Scheduled, SeqLoop, SIf, SStmt, SyncThreads, ThreadLoop, ThreadRange, TileOp, TmaLoad, TmaStore, Wait, swalk,
)

__all__ = [
    "DTYPES", "DType", "canonical", "dtype",
    "POINTER_READ", "POINTER_WRITE", "AddressOf", "AtomicAdd", "BinOp", "Buffer", "Cast", "Const", "Copy", "Expr", "Extern", "Fill", "For", "Gemm",
    "If", "Kernel", "Layout", "Load", "LoopKind", "Overlay", "Reduce", "Region", "Scope", "Select", "Stmt", "Store",
    "UnOp", "Var", "walk",
    "Arrive", "ArriveExpectTx", "CpAsyncArrive", "Decision", "Elect", "FenceProxyAsync", "Leaf", "MBarrier", "Role",
    "RoleSplit", "Scheduled", "SeqLoop", "SIf", "SStmt", "SyncThreads", "ThreadLoop", "ThreadRange", "TileOp",
    "TmaLoad", "TmaStore", "Wait", "swalk",
]
