"""TileLang's ``tilelang.engine`` names that egtile provides (host side): :mod:`egtile.engine.callback`."""
