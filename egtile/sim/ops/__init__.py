"""egtile's own simulator semantics, one module per family of scheduled constructs, each registering its
handlers with :func:`egtile.sim.semantics.register_semantics` (importing this package registers them all).

* :mod:`.leaf`: scalar statements (``Leaf``: store, atomic add, extern call) and repeated-iteration tracking;
* :mod:`.control`: ``SeqLoop``, ``ThreadLoop``, ``SIf``, ``Elect``, ``RoleSplit``;
* :mod:`.sync`: mbarrier wait / arrive / arrive.expect_tx, CTA barriers, the async-proxy fence;
* :mod:`.tma`: TMA tile loads (async, completing transaction bytes) and stores (async-proxy reads);
* :mod:`.cp_async`: ``cp.async`` tile copies and their deferred mbarrier arrival;
* :mod:`.tileop`: cooperative tile statements (``TileOp``);
* :mod:`.fragment`: statements that run by a register fragment's layout (``FragmentOp``, ``LayoutLoop``);
* :mod:`.wgmma`: asynchronous wgmma groups and ``wait_group`` (``WgmmaMma``, ``WgmmaWait``);
* :mod:`.handshake`: the named-barrier handshake between a role's warpgroups (``NamedSync``, ``NamedArrive``).
"""

from egtile.sim.ops import control, cp_async, fragment, leaf, sync, tileop, tma, wgmma  # noqa: F401  (registration)
from egtile.sim.ops import usersync  # noqa: F401,E402  (registration: the user-protocol nodes)
from egtile.sim.ops import handshake  # noqa: F401,E402  (registration: the warpgroup handshake)
