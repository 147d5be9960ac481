"""``device_check``: examples/_check.check, computed on the tensors' device (large outputs; not a benchmark).

Same rule as ``_check.check`` (every element ``|got - ref| <= atol + rtol |ref|``, NaN fails); only when some
element fails does it call ``_check.check`` on the CPU for the message naming the worst element.
"""

from __future__ import annotations

import torch


def device_check(what: str, got: torch.Tensor, ref: torch.Tensor, *, rtol, atol) -> bool:
    from _check import check

    if got.shape != ref.shape:
        return check(what, got, ref, rtol=rtol, atol=atol)
    g = got.detach().to(ref.device, torch.float64)
    r = ref.detach().to(torch.float64)
    bound = atol + rtol * r.abs()
    ok = bool(((g - r).abs() <= bound).all())
    return True if ok else check(what, got, ref, rtol=rtol, atol=atol)
