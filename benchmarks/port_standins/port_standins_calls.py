"""Which library stand-ins the current ported run called (``benchmarks/tilelang_port.py`` clears it per file and
names each library in the file's outcome: "matched (against a torch stand-in for flash_attn)")."""

CALLED: set[str] = set()
