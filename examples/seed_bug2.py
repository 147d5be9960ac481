"""
Minimal reproducer for Bug 2 (fixed in 0dba22aa):

  producer_consumer_ws.cc: wait_insert_pos was only computed for
  kTmaProducer statements.  SIMT/cp.async producers were skipped, so
  the consumer read from SIMT-produced shared buffers before the
  barrier wait - a data race.

Trigger conditions:
  1. Warp-specialized pipeline (num_stages > 0, auto-WS via TMA).
  2. At least one SIMT producer writes to a shared buffer.
  3. Consumer reads the SIMT-produced buffer at an EARLIER statement
     than the first TMA-produced buffer read.  (If both are consumed
     in the same gemm/tile-op, the TMA-derived wait position covers
     both and the bug is masked.)

What the generated CUDA looks like WITHOUT the fix:
  // Consumer warp group (T.ws(0)):
  stmt_0:  read B_shared[SIMT-produced]  // NO barrier wait yet!
  mbarrier_wait(...)                      // wait_insert_pos = 1 (from TMA)
  stmt_1:  read A_shared[TMA-produced]

  -> B_shared is read before the producer signalled "done".
  -> Consumer may see stale/partially-written data (data race).

WITH the fix:
  // Consumer warp group (T.ws(0)):
  mbarrier_wait(...)                      // wait_insert_pos = 0 (pulled back)
  stmt_0:  read B_shared[SIMT-produced]  // safe
  stmt_1:  read A_shared[TMA-produced]

Observable effect:
  Each pipeline stage the SIMT producer copies a distinct row of
  B values to B_shared.  The consumer reads B_shared at stmt 0.
  Without the fix, the consumer may read stale/wrong B_shared data
  because it races ahead of the SIMT producer's forward barrier.
"""

import egtile as tilelang
from egtile import language as T
import torch


@tilelang.jit
def bug2_kernel(
    num_stages: int = 4,
    block_N: int = 64,
):
    @T.prim_func
    def main(
        A_in: T.Tensor((num_stages, block_N), "float16"),
        B_in: T.Tensor((num_stages, block_N), "float16"),
        B_out: T.Tensor((num_stages, block_N), "float16"),
        A_out: T.Tensor((num_stages, block_N), "float16"),
    ):
        with T.Kernel(1, threads=128) as _bx:
            A_shared = T.alloc_shared((block_N,), "float16")
            B_shared = T.alloc_shared((block_N,), "float16")

            for ko in T.Pipelined(num_stages, num_stages=2):
                # ---- Producer side (auto-assigned to T.ws(1)) ----
                # SIMT producer: global->shared copy of B_in.
                # Classified as kSimtProducer (writes_shared+reads_global).
                for i in T.Parallel(block_N):
                    B_shared[i] = B_in[ko, i]

                # TMA producer: global->shared copy of A_in.
                # Classified as kTmaProducer (triggers auto-WS on Hopper).
                T.copy(A_in[ko, :], A_shared)

                # ---- Consumer side (auto-assigned to T.ws(0)) ----
                # CRITICAL ORDERING: stmt 0 reads SIMT buffer BEFORE
                # stmt 1 reads TMA buffer.  Without the fix, the
                # compiler places the forward-barrier wait at stmt 1
                # (derived from TMA buffer's first read), so stmt 0
                # executes without waiting — a data race on B_shared.
                #
                # Use a single-element read (not T.Parallel) so the
                # compiler doesn't merge stmt 0 and stmt 1 into one
                # consumer statement.
                #
                # Stmt 0: read SIMT-produced B_shared (barrier-skipped w/o fix).
                B_out[ko, 0] = B_shared[0]

                # Stmt 1: read TMA-produced A_shared (barrier placed here w/o fix).
                for i in T.Parallel(block_N):
                    A_out[ko, i] = A_shared[i]

    return main


if __name__ == '__main__':
    num_stages = 4
    block_N = 64

    kernel = bug2_kernel(num_stages, block_N)

    A_in = torch.arange(num_stages * block_N, device="cuda", dtype=torch.float16).reshape(
        num_stages, block_N
    )
    # B_in: each stage has a distinct first-element value
    B_in = torch.zeros((num_stages, block_N), device="cuda", dtype=torch.float16)
    for k in range(num_stages):
        B_in[k, 0] = float(k * 100)  # stage 0=0, stage 1=100, stage 2=200, ...

    B_out = torch.zeros((num_stages, block_N), device="cuda", dtype=torch.float16)
    A_out = torch.zeros((num_stages, block_N), device="cuda", dtype=torch.float16)

    kernel(A_in, B_in, B_out, A_out)
    torch.cuda.synchronize()

    b_in_cpu = B_in.cpu()
    b_out_cpu = B_out.cpu()
    a_out_cpu = A_out.cpu()
    a_in_cpu = A_in.cpu()

    print("=== Bug 2 reproducer: SIMT producer barrier wait position ===")
    print()
    print("Each stage: SIMT producer copies B to B_shared [global->shared],")
    print("TMA copies A to A_shared.")
    print("Consumer reads B_shared[0] at stmt 0, A_shared at stmt 1.")
    print()

    b_ok = torch.allclose(b_out_cpu[:, 0], b_in_cpu[:, 0])
    a_ok = torch.allclose(a_out_cpu, a_in_cpu)

    print(f"B_out first-elem matches B_in: {b_ok}")
    print(f"A_out matches A_in: {a_ok}")

    if b_ok and a_ok:
        print()
        print("PASS: Both outputs match. Bug is fixed.")
    elif not b_ok:
        print()
        print("FAIL (BUG PRESENT): B_out first element does not match B_in!")
        print("  The consumer read B_shared[0] before the SIMT producer's")
        print("  forward-barrier arrive was waited on, getting a stale value.")
        for k in range(num_stages):
            expected = b_in_cpu[k, 0].item()
            actual = b_out_cpu[k, 0].item()
            print(f"  Stage {k}: got {actual:.0f} expected {expected:.0f}")
    else:
        print()
        print(f"UNEXPECTED: A mismatch (A_out)")
