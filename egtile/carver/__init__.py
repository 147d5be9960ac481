"""The parts of TileLang's ``tilelang.carver`` that kernels and their host code name, with TileLang's meaning.

``carver`` is TileLang's own tuner: device descriptions (:mod:`.arch`), templates whose *roller* recommends tile
configurations from a hardware model (:mod:`.template`), and rasterization plans (:mod:`.roller.rasterization`).
egtile keeps the device description (``CUDA``: the numbers of :mod:`egtile.device`) and the names an example
imports, so that it ports; it deliberately has no roller: in egtile the e-graph's cost model makes the
schedule decisions and :func:`egtile.autotune` measures the configurations you give it, so
``MatmulTemplate(...).recommend_hints()`` raises :class:`~egtile.errors.UnsupportedError` naming that
alternative. Every other carver module stays left out (``egtile.porting.LEFT_OUT``).
"""
