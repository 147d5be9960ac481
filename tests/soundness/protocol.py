"""Codegen's synchronization protocol checked by meaning (issue 15 item 1): what the emitted CUDA C++ does,
thread by thread and iteration by iteration, against what the schedule says.

The checkers (``egtile.verify``, ``egtile.sim``) read the scheduled IR; a bug in the emitters (a parity
flipped, a stage off by one, an arrive count or a transaction byte count changed, a barrier dropped) is
invisible to them. This module runs the *emitted source* instead: it parses the kernel function of
``egtile.codegen.emit(s)`` (the emitter's own line structure: one statement per line, blocks opened by a
line ending in ``{``), and for one thread ``tid`` of one block executes its control flow -- ``for`` loops,
``if``/``else`` on the thread and warpgroup index, ``const`` integer bindings -- evaluating every integer
expression with C semantics (``/`` truncates, ``%`` takes the dividend's sign). Each synchronization
helper call becomes an event whose arguments are *values* (barrier, stage, parity, bytes, count, TMA
coordinates), never names or texts. The same events are derived from the scheduled IR by walking it for
the same thread with :func:`egtile.evaluate.evaluate`. The two sequences must be equal for every thread
of the first and the last block.

What the helpers themselves do (the inline PTX in ``codegen/include``) is checked in the machine code:
:func:`required_sass` lists the SASS instructions the schedule's synchronization needs
(``FENCE.VIEW.ASYNC.S`` for ``fence.proxy.async``, ``SYNCS.PHASECHK`` for ``try_wait.parity``, ...).

A block or loop of the emitted source that makes no synchronization call is not executed (its data
accesses are the checkers' business, and the GPU tests'); one that does, under a condition the check
cannot evaluate (one that reads memory), is an error: an mbarrier operation under a data-dependent branch
is illegal (L3), and the check never passes silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from egtile.evaluate import evaluate
from egtile.ir import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, RoleSplit, Scheduled, SeqLoop, SIf,
    SyncThreads, ThreadLoop, TmaLoad, TmaStore, Wait,
)

Event = tuple


class Unknown(Exception):
    """An expression the protocol check cannot evaluate (it reads memory or calls a function)."""


class ProtocolError(Exception):
    """The emitted source's synchronization cannot be checked (a call under a data-dependent condition, an
    unknown synchronization helper)."""


# ----------------------------------------------------------------------------------------------------
# C integer expressions

_TOKEN = re.compile(r"\s*(?:(\d+)(?:ull|ULL|LL|ll|u|U)?|([A-Za-z_]\w*)|(<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^~!<>?:(),\[\]]))")
_TYPES = {"int", "unsigned", "long", "bool", "eg_u32", "eg_u64", "short", "char", "signed"}
_TEMPLATES = {"eg_cast", "eg_floordiv", "eg_floormod", "eg_min", "eg_max"}
_BINARY = {  # C precedence: higher binds tighter
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7, ">=": 7,
    "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise Unknown(f"cannot tokenize {text[pos:]!r}")
        out.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return out


def _cdiv(a: int, b: int) -> int:
    if b == 0:
        raise Unknown("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _cmod(a: int, b: int) -> int:
    return a - b * _cdiv(a, b)


def _apply(op: str, a: int, b: int) -> int:
    match op:
        case "+": return a + b
        case "-": return a - b
        case "*": return a * b
        case "/": return _cdiv(a, b)
        case "%": return _cmod(a, b)
        case "&": return a & b
        case "|": return a | b
        case "^": return a ^ b
        case "<<": return a << b
        case ">>": return a >> b
        case "==": return int(a == b)
        case "!=": return int(a != b)
        case "<": return int(a < b)
        case "<=": return int(a <= b)
        case ">": return int(a > b)
        case ">=": return int(a >= b)
        case "&&": return int(bool(a) and bool(b))
        case "||": return int(bool(a) or bool(b))
    raise Unknown(op)


class _Parser:
    def __init__(self, text: str, env: dict[str, Any]) -> None:
        self.t = _tokens(text)
        self.i = 0
        self.env = env

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise Unknown(f"expected {want!r}, got {tok!r}")
        self.i += 1
        return tok

    def expr(self, min_prec: int = 0) -> int:
        a = self.unary()
        while True:
            op = self.peek()
            if op == "?" and min_prec == 0:
                self.take("?")
                x = self.expr()
                self.take(":")
                y = self.expr()
                a = x if a else y
                continue
            p = _BINARY.get(op or "")
            if p is None or p < min_prec:
                return a
            self.take()
            b = self.expr(p + 1)
            a = _apply(op, a, b)

    def _cast_ahead(self) -> bool:
        j = self.i + 1
        while j < len(self.t) and self.t[j] in _TYPES:
            j += 1
        return j > self.i + 1 and j < len(self.t) and self.t[j] == ")"

    def unary(self) -> int:
        tok = self.peek()
        if tok in ("-", "+", "!", "~"):
            self.take()
            v = self.unary()
            return {"-": -v, "+": v, "!": int(not v), "~": ~v}[tok]
        if tok == "(":
            if self._cast_ahead():  # (int)x, (long long)x: integer casts keep the value here
                while self.take() != ")":
                    pass
                return self.unary()
            self.take("(")
            v = self.expr()
            self.take(")")
            return v
        if tok is None:
            raise Unknown("empty expression")
        self.take()
        if tok.isdigit():
            return int(tok)
        if tok in ("true", "false"):
            return int(tok == "true")
        if tok in _TEMPLATES and self.peek() == "<":  # eg_cast<int>(x), eg_floordiv<int>(a, b), ...
            self.take("<")
            while self.take() != ">":
                pass
            args = self.call_args()
            return _helper(tok, args)
        if self.peek() in ("(", "["):
            raise Unknown(f"{tok}{self.peek()}...: a call or a memory read")
        if tok not in self.env:
            raise Unknown(f"{tok} is not a known integer")
        v = self.env[tok]
        if v is None:
            raise Unknown(f"{tok} has no known value")
        return v

    def call_args(self) -> list[int]:
        self.take("(")
        args = [self.expr()]
        while self.peek() == ",":
            self.take(",")
            args.append(self.expr())
        self.take(")")
        return args


def _helper(name: str, args: list[int]) -> int:
    match name, args:
        case "eg_cast", [x]:
            return x
        case "eg_floordiv", [a, b]:
            if b == 0:
                raise Unknown("division by zero")
            return a // b
        case "eg_floormod", [a, b]:
            if b == 0:
                raise Unknown("division by zero")
            return a % b
        case "eg_min", [a, b]:
            return min(a, b)
        case "eg_max", [a, b]:
            return max(a, b)
    raise Unknown(f"helper {name}")


def c_eval(text: str, env: dict[str, Any]) -> int:
    """The value of C integer expression ``text`` with variables from ``env`` (:class:`Unknown` if it reads
    memory, calls a function other than egtile's integer helpers, or names an unknown variable)."""
    p = _Parser(text, env)
    v = p.expr()
    if p.peek() is not None:
        raise Unknown(f"trailing {p.peek()!r} in {text!r}")
    return v


def split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a call's argument text."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([<{" and not (ch == "<" and cur and cur[-1] == "<"):
            depth += ch in "([{"
        if ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


# ----------------------------------------------------------------------------------------------------
# the emitted kernel's block structure


@dataclass
class Node:
    kind: str                      # "stmt", "for", "if", "block"
    text: str = ""                 # statement text or for-header
    body: list[Node] = field(default_factory=list)
    branches: list[tuple[str | None, list[Node]]] = field(default_factory=list)  # if: (cond or None=else, body)
    sync: bool = False             # makes a synchronization call (itself or inside)


_SYNC_CALL = re.compile(r"\b(eg_mbarrier_\w+|eg_tma_\w+|eg_cp_async_mbarrier\w*|eg_fence_\w+|eg_named_barrier_\w+|"
                        r"__syncthreads|eg_cp_async_\w+)\s*\(")


def _strip(line: str) -> str:
    # the emitter puts comments only at line ends (`// sid 3`) or on lines of their own
    s = line.strip()
    cut = s.find("//")
    return (s[:cut] if cut >= 0 else s).strip()


def kernel_body(source: str) -> list[str]:
    """The lines of the ``__global__`` function's body."""
    lines = source.split("\n")
    start = next(i for i, ln in enumerate(lines) if "__global__" in ln)
    while not lines[start].rstrip().endswith("{"):
        start += 1
    depth, out = 1, []
    for ln in lines[start + 1:]:
        s = _strip(ln)
        depth += s.count("{") - s.count("}")
        if depth == 0:
            return out
        out.append(ln)
    raise ProtocolError("unbalanced kernel body")


def parse(lines: list[str]) -> list[Node]:
    """The block tree of emitted lines."""
    root: list[Node] = []
    stack: list[list[Node]] = [root]
    open_ifs: list[Node | None] = []
    for ln in lines:
        s = _strip(ln)
        if not s or s.startswith("#"):
            continue
        if s == "}":
            stack.pop()
            open_ifs.pop()
            continue
        m = re.fullmatch(r"\}\s*else(?:\s+if\s*\((.*)\))?\s*\{", s)
        if m:
            stack.pop()
            node = open_ifs[-1]
            assert node is not None and node.kind == "if", s
            node.branches.append((m.group(1), []))
            stack.append(node.branches[-1][1])
            continue
        if s.endswith("{"):
            head = s[:-1].strip()
            if head.startswith("for"):
                node = Node("for", head)
                child = node.body
            elif head.startswith("if"):
                cond = re.fullmatch(r"if\s*\((.*)\)", head)
                assert cond, head
                node = Node("if", branches=[(cond.group(1), [])])
                child = node.branches[0][1]
            elif head == "":
                node = Node("block")
                child = node.body
            else:
                raise ProtocolError(f"unknown block head {head!r}")
            stack[-1].append(node)
            stack.append(child)
            open_ifs.append(node)
            continue
        stack[-1].append(Node("stmt", s, sync=bool(_SYNC_CALL.search(s))))
    _mark(root)
    return root


def _mark(nodes: list[Node]) -> bool:
    any_sync = False
    for n in nodes:
        if n.kind == "for" or n.kind == "block":
            n.sync = _mark(n.body)
        elif n.kind == "if":
            n.sync = any([_mark(b) for _, b in n.branches])
        any_sync |= n.sync
    return any_sync


_FOR = re.compile(r"for\s*\(\s*(?:[\w:<> ]+?\s+)?(\w+)\s*=\s*(.*?);\s*(\w+)\s*(<|<=|!=)\s*(.*?);\s*(?:\+\+(\w+)|(\w+)\+\+|(\w+)\s*\+=\s*(.*?))\s*\)")
_DECL = re.compile(r"(?:const\s+)?(?:[\w:]+(?:<[^>]*>)?\s*\**\s+)+(\w+)\s*=\s*(.*);")


def _bar(arg: str, env) -> tuple[str, int]:
    m = re.fullmatch(r"&\s*(\w+)\s*\[(.*)\]", arg.strip())
    if not m:
        raise ProtocolError(f"barrier argument {arg!r} is not &bar[stage]")
    return m.group(1), c_eval(m.group(2), env)


def _call_event(s: str, env) -> Event | None:
    m = re.match(r"(\w+)\s*(?:<([^>]*)>)?\s*\((.*)\)\s*;$", s)
    if not m:
        return None
    name, targs, args = m.group(1), m.group(2), split_args(m.group(3))
    match name:
        case "eg_mbarrier_init":
            return ("init",) + _bar(args[0], env) + (c_eval(args[1], env),)
        case "eg_fence_mbarrier_init":
            return ("fence_init",)
        case "eg_mbarrier_wait_parity":
            return ("wait",) + _bar(args[0], env) + (c_eval(args[1], env),)
        case "eg_mbarrier_arrive":
            return ("arrive",) + _bar(args[0], env)
        case "eg_mbarrier_arrive_expect_tx":
            return ("arrive_tx",) + _bar(args[0], env) + (c_eval(args[1], env),)
        case "eg_cp_async_mbarrier_arrive_noinc":
            return ("cp_arrive",) + _bar(args[0], env)
        case "__syncthreads":
            return ("bar", 0, None)
        case "eg_named_barrier_sync":
            return ("bar", c_eval(args[0], env), c_eval(args[1], env))
        case "eg_fence_proxy_async_shared":
            return ("fence",)
        case "eg_tma_store_wait":
            return ("tma_store_wait",)
        case "eg_tma_prefetch_descriptor":
            return None  # a hint to the TMA unit: no completion, nothing waits on it
    if re.fullmatch(r"eg_tma_load_\dd", name):
        return ("tma_load",) + _bar(args[2], env) + (tuple(c_eval(a, env) for a in args[3:]),)
    if re.fullmatch(r"eg_tma_store_\dd", name):
        return ("tma_store", tuple(c_eval(a, env) for a in args[2:]))
    if name.startswith("eg_cp_async_") or name.startswith("eg_setmaxnreg"):
        return None  # the copies themselves: data, not protocol
    if _SYNC_CALL.match(name + "("):
        raise ProtocolError(f"unknown synchronization helper {name} in {s!r}")
    return None


def run_emitted(tree: list[Node], env: dict[str, Any], *, max_steps: int = 1_000_000) -> list[Event]:
    """The synchronization events thread ``env['eg_tid']`` makes running the emitted ``tree``."""
    out: list[Event] = []
    steps = [0]

    def go(nodes: list[Node], env: dict[str, Any]) -> None:
        for n in nodes:
            steps[0] += 1
            if steps[0] > max_steps:
                raise ProtocolError("too many steps")
            if n.kind == "stmt":
                m = _DECL.fullmatch(n.text)
                if m and not n.sync:
                    if "threadIdx" in n.text or "blockIdx" in n.text:
                        continue  # the thread and block indices: bound by the caller
                    try:
                        env[m.group(1)] = c_eval(m.group(2), env)
                    except Unknown:
                        env[m.group(1)] = None
                    continue
                if n.sync:
                    e = _call_event(n.text, env)
                    if e is not None:
                        out.append(e)
                continue
            if not n.sync:
                continue
            if n.kind == "block":
                go(n.body, dict(env))
            elif n.kind == "if":
                for cond, body in n.branches:
                    try:
                        taken = cond is None or c_eval(cond, env)
                    except Unknown as e:
                        raise ProtocolError(f"synchronization under the condition {cond!r}: {e}") from None
                    if taken:
                        go(body, dict(env))
                        break
            else:
                m = _FOR.fullmatch(n.text)
                if not m:
                    raise ProtocolError(f"cannot read loop {n.text!r}")
                v, init, cv, cmp, bound = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
                step_text = m.group(9)
                inner = dict(env)
                try:
                    inner[v] = c_eval(init, env)
                    while True:
                        limit = c_eval(bound, inner)
                        if not {"<": inner[v] < limit, "<=": inner[v] <= limit, "!=": inner[v] != limit}[cmp]:
                            break
                        go(n.body, dict(inner))
                        inner[v] += c_eval(step_text, inner) if step_text else 1
                except Unknown as e:
                    raise ProtocolError(f"synchronization in the loop {n.text!r}: {e}") from None

    go(tree, env)
    return out


# ----------------------------------------------------------------------------------------------------
# the same events from the schedule


def _no_load(*_):
    raise Unknown("a memory read")


def _ev(e, env) -> int:
    try:
        return int(evaluate(e, env, _no_load))
    except KeyError as k:
        raise Unknown(f"unbound {k}") from None


_SYNC_NODES = (Wait, Arrive, ArriveExpectTx, CpAsyncArrive, SyncThreads, FenceProxyAsync, TmaLoad, TmaStore)


def _has_sync(stmts) -> bool:
    from egtile.ir import swalk

    return any(isinstance(x, _SYNC_NODES) for x in swalk(tuple(stmts)))


def scheduled_events(s: Scheduled, tid: int, block: dict[str, int], ident) -> list[Event]:
    """The synchronization events thread ``tid`` makes running schedule ``s`` in the block whose indices are
    ``block``. ``ident`` maps a barrier name to its C identifier (``egtile.codegen.names.barrier_ident``)."""
    out: list[Event] = []
    if s.barriers:
        if tid == 0:
            out += [("init", ident(m.name), i, m.arrive_count) for m in s.barriers for i in range(m.stages)]
            out.append(("fence_init",))
        out.append(("bar", 0, None))

    def go(stmts, env) -> None:
        for x in stmts:
            match x:
                case Wait():
                    out.append(("wait", ident(x.barrier), _ev(x.stage, env), _ev(x.parity, env)))
                case ArriveExpectTx():
                    out.append(("arrive_tx", ident(x.barrier), _ev(x.stage, env), x.tx_bytes))
                case Arrive():
                    out.append(("arrive", ident(x.barrier), _ev(x.stage, env)))
                case CpAsyncArrive():
                    out.append(("cp_arrive", ident(x.barrier), _ev(x.stage, env)))
                case SyncThreads():
                    whole = x.threads.begin == 0 and x.threads.count == s.threads and x.barrier_id == 0
                    out.append(("bar", 0, None) if whole else ("bar", x.barrier_id, x.threads.count))
                case FenceProxyAsync():
                    out.append(("fence",))
                case TmaLoad():
                    coords = tuple(_ev(o, env) for o in reversed(x.src.offsets))
                    out.append(("tma_load", ident(x.barrier), _ev(x.stage, env), coords))
                case TmaStore():
                    out.append(("tma_store", tuple(_ev(o, env) for o in reversed(x.dst.offsets))))
                    out.append(("tma_store_wait",))
                case RoleSplit():
                    for r in x.roles:
                        if r.threads.begin <= tid < r.threads.end:
                            go(r.body, env)
                case Elect():
                    if tid == x.threads.begin:
                        go(x.body, env)
                case SeqLoop():
                    if not _has_sync(x.body):
                        continue
                    lo, hi = _ev(x.start, env), _ev(x.stop, env)
                    for k in range(lo, hi):
                        go(x.body, {**env, x.var.name: k})
                case SIf():
                    if not _has_sync(x.then_body + x.else_body):
                        continue
                    try:
                        c = _ev(x.cond, env)
                    except Unknown as e:
                        raise ProtocolError(f"synchronization under a data-dependent T.If: {e}") from None
                    go(x.then_body if c else x.else_body, env)
                case ThreadLoop():
                    if not _has_sync(x.body):
                        continue
                    if not x.threads.begin <= tid < x.threads.end:
                        continue
                    n = x.trip_count
                    if x.mapping == "partitioned":
                        if x.vector != 1:
                            raise ProtocolError("synchronization inside a vectorized T.Parallel")
                        flats = range(tid - x.threads.begin, n, x.threads.count)
                    else:
                        flats = range(n)
                    for f in flats:
                        digits, rest = [], f
                        for ext in reversed(x.extents):
                            digits.append(rest % ext)
                            rest //= ext
                        go(x.body, {**env, **{v.name: d for v, d in zip(x.vars, reversed(digits))}})
                case _:
                    if isinstance(x, _SYNC_NODES):
                        raise ProtocolError(f"unhandled {type(x).__name__}")

    go(s.body, dict(block))
    return out


# ----------------------------------------------------------------------------------------------------
# the check


def _blocks(s: Scheduled) -> list[dict[str, int]]:
    names = [v.name for v in s.kernel.block_vars]
    first = {n: 0 for n in names}
    last = {n: g - 1 for n, g in zip(names, s.kernel.grid)}
    return [first] if first == last else [first, last]


def check_protocol(s: Scheduled, source: str | None = None, *, threads: list[int] | None = None) -> list[str]:
    """Differences between the synchronization the emitted source performs and the one ``s`` prescribes,
    per thread and block (empty: they agree event for event). ``source`` defaults to ``emit(s)``."""
    from egtile.codegen import emit
    from egtile.codegen.names import barrier_ident, ident, schedule_scope

    with schedule_scope(s):
        src = source if source is not None else emit(s)
        idents = {m.name: barrier_ident(m.name) for m in s.barriers}
        block_c = {v.name: ident(v.name) for v in s.kernel.block_vars}
    tree = parse(kernel_body(src))
    problems: list[str] = []
    for block in _blocks(s):
        for tid in threads if threads is not None else range(s.threads):
            env = {"eg_tid": tid, **{block_c[n]: v for n, v in block.items()}}
            got = run_emitted(tree, env)
            want = scheduled_events(s, tid, block, idents.__getitem__)
            if got != want:
                i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                problems.append(
                    f"block {block} thread {tid}: event {i}: emitted {got[i] if i < len(got) else 'nothing'}, "
                    f"schedule says {want[i] if i < len(want) else 'nothing'} ({len(got)} vs {len(want)} events)")
                if len(problems) >= 5:
                    return problems
    return problems


# ----------------------------------------------------------------------------------------------------
# the machine code


_SASS = {  # event kind -> (SASS opcode prefix, the PTX it stands for)
    "init": ("SYNCS.EXCH", "mbarrier.init"),
    "wait": ("SYNCS.PHASECHK", "mbarrier.try_wait.parity"),
    "arrive": ("SYNCS.ARRIVE", "mbarrier.arrive"),
    "arrive_tx": ("SYNCS.ARRIVE", "mbarrier.arrive.expect_tx"),
    "tma_load": ("UTMALDG", "cp.async.bulk.tensor (load)"),
    "tma_store": ("UTMASTG", "cp.async.bulk.tensor (store)"),
    "fence": ("FENCE.VIEW.ASYNC.S", "fence.proxy.async.shared::cta"),
    "bar": ("BAR.SYNC", "bar.sync / __syncthreads"),
}


def probe_threads(s: Scheduled) -> list[int]:
    """Threads where roles, elections and warps differ: each warpgroup's first, second and last thread and
    the first two of its second warp, and every elected thread."""
    from egtile.ir import swalk

    out = {x.threads.begin for x in swalk(s.body) if isinstance(x, Elect)}
    for wg in range(0, s.threads, 128):
        out |= {wg, wg + 1, wg + 32, wg + 33, wg + 127}
    return sorted(t for t in out if t < s.threads)


def required_sass(s: Scheduled) -> dict[str, str]:
    """SASS opcode prefixes the schedule's synchronization needs in the cubin, each with the PTX it stands
    for: the kinds of event some thread actually performs (a loop of zero trips needs nothing: ptxas
    removes it)."""
    from egtile.codegen.names import barrier_ident, schedule_scope

    with schedule_scope(s):
        idents = {m.name: barrier_ident(m.name) for m in s.barriers}
    kinds: set[str] = set()
    for block in _blocks(s):
        for tid in probe_threads(s):
            kinds |= {e[0] for e in scheduled_events(s, tid, block, idents.__getitem__)}
    return {_SASS[k][0]: _SASS[k][1] for k in sorted(kinds) if k in _SASS}


def missing_sass(s: Scheduled, sass_text: str) -> list[str]:
    """Required SASS instructions (:func:`required_sass`) absent from disassembly ``sass_text``, and a
    ``fence.proxy.async`` that does not come before the first TMA store it must order."""
    from egtile.codegen import sass

    ops = sass.opcodes(sass_text)
    out = [f"{op} ({ptx}) missing" for op, ptx in required_sass(s).items()
           if not any(o.startswith(op) for o in ops)]
    if "FENCE.VIEW.ASYNC.S" in required_sass(s) and "UTMASTG" in required_sass(s):
        fence = sass_text.find("FENCE.VIEW.ASYNC.S")
        store = sass_text.find("UTMASTG")
        if fence < 0 or store < fence:
            out.append("no FENCE.VIEW.ASYNC.S before the first UTMASTG")
    return out
