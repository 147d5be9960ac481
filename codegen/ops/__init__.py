"""egtile's own CUDA emitters, one module per family of scheduled constructs, each registering its
handlers with :func:`egtile.codegen.registry.register_emitter` (importing this package registers them all).

* :mod:`.leaf`: scalar statements (``Leaf``: store, atomic add, extern call);
* :mod:`.control`: ``SeqLoop``, ``ThreadLoop``, ``SIf``, ``Elect``, ``RoleSplit`` (thread sets and roles);
* :mod:`.sync`: mbarrier wait / arrive / arrive.expect_tx, CTA barriers, the async-proxy fence;
* :mod:`.tma`: TMA tile loads and stores (``cp.async.bulk.tensor``) and their tensor maps;
* :mod:`.cp_async`: per-thread ``cp.async`` copies and their mbarrier arrival;
* :mod:`.tileop`: cooperative tile statements (``TileOp``: copy, fill, gemm, reduce);
* :mod:`.fragment`: statements that run by a register fragment's layout (``FragmentOp``, ``LayoutLoop``);
* :mod:`.wgmma`: ``wgmma.mma_async`` issue and ``wait_group`` (``WgmmaMma``, ``WgmmaWait``);
* :mod:`.handshake`: the named-barrier handshake between a role's warpgroups (``NamedSync``, ``NamedArrive``).
"""

from egtile.codegen.ops import control, cp_async, fragment, leaf, sync, tileop, tma, wgmma  # noqa: F401  (registration)
from egtile.codegen.ops import usersync  # noqa: F401,E402  (registration: the user-protocol nodes)
from egtile.codegen.ops import handshake  # noqa: F401,E402  (registration: the warpgroup handshake)
