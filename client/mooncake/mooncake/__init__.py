"""mooncake: Mooncake's Transfer Engine Python API (mooncake.engine) served by b10d.

Installed on purpose, beside the b10 package, so that SGLang's mooncake backend and
vLLM's MooncakeConnector move KV cache through b10d without a line changed:

    from mooncake.engine import TransferEngine

Only mooncake.engine is served: Mooncake's store, its collectives (mooncake.pg, ep)
and its tools are Mooncake's own. It refuses to import where Mooncake's own files or
distributions are installed beside it (they share this package's directory), unless
B10_MOONCAKE_ALONGSIDE=1 (then it warns).

__version__ is the Mooncake release whose Transfer Engine semantics it implements;
__b10_mooncake_version__ is this module's own.
"""
import os as _os
import warnings as _warnings
from importlib import metadata as _metadata
from pathlib import Path as _Path

from ._version import __version__ as _full

__version__, _, _label = _full.partition("+")
__b10_mooncake_version__ = _label.partition(".")[2]
BACKEND = "b10"     # what serves this module: lets a caller tell it from Mooncake itself


def _real_mooncake() -> list:
    """Mooncake's distributions (mooncake-transfer-engine and its variants) other than
    this one, and Mooncake's compiled engine in this very directory."""
    found = []
    try:
        dists = list(_metadata.distributions())
    except Exception:        # a damaged environment: judge by the files alone
        dists = []
    for d in dists:
        try:
            name = (d.metadata["Name"] or "").lower().replace("_", "-")
            version = d.version or ""
        except Exception:
            continue
        if name.startswith("mooncake-transfer-engine") and \
                version.partition("+")[2].split(".")[0] != "b10":
            found.append(f"{name} {version}")
    here = _Path(__file__).resolve().parent
    found += [f"{p.name} in {here}" for p in sorted(here.glob("engine*.so"))]
    return found


_found = _real_mooncake()
if _found:
    _msg = (f"the module mooncake is b10's, but Mooncake's own is installed beside it "
            f"({', '.join(_found)}): both write the same files. Uninstall Mooncake, then "
            f"reinstall b10's mooncake (client/README.md, \"Mooncake's Transfer Engine\")")
    if _os.environ.get("B10_MOONCAKE_ALONGSIDE", "") != "1":
        raise ImportError(_msg + "; B10_MOONCAKE_ALONGSIDE=1 imports it anyway")
    _warnings.warn(_msg, RuntimeWarning, stacklevel=2)

__all__ = ["engine"]
