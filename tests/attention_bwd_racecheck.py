"""Run the flash-attention backward (tests/attention_bwd.py) once at a small size on the GPU, for
``compute-sanitizer --tool racecheck`` / ``synccheck``: ``python tests/attention_bwd_racecheck.py [causal]``."""

from __future__ import annotations

import sys

import attention_bwd as AB

if __name__ == "__main__":
    causal = "causal" in sys.argv[1:]
    worst = AB.run_case(1, 1, 128, 64, causal, target="cuda", seed=0)
    print(f"racecheck run ({'causal' if causal else 'full'}): worst error / allowed {worst}")
    sys.exit(0 if all(v <= 1.0 for v in worst.values()) else 1)
