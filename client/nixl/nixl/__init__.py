"""nixl: NIXL's Python API (nixl._api, nixl._bindings, nixl._utils, nixl.logging)
served by b10d.

The distribution `nixl` of version <NIXL API level>+b10.<release> (nixl/_version.py),
installed on purpose beside the b10 package, so that vLLM, SGLang and Dynamo move KV
cache through b10d without a line changed; it behaves as NIXL 1.5.1 does
(tests/python/test_nixl_diff.py shows it side by side with NIXL itself, and
tests/python/nixl_differences.py lists where, and why, it does not):

    from nixl._api import nixl_agent, nixl_agent_config
    from nixl._bindings import nixlXferTelemetry, nixlRemoteDisconnectError
    from nixl import nixl_agent, nixl_agent_config, nixl_xfer_handle   # TensorRT-LLM

As NIXL's package does, the package itself carries every public name of its four
modules. It refuses to import beside a real NIXL distribution (a `nixl` without the
label b10, nixl-cu12, nixl-cu13) or an earlier build of its own (b10-nixl), unless
B10_NIXL_ALONGSIDE=1 (then it warns).

__version__ is the NIXL API level whose semantics it implements (engines turn
features on by it, also as importlib.metadata.version("nixl"); NIXL's own package
has none, a listed difference); __b10_nixl_version__ is this adapter's own, and
__backend__ is "b10": a caller can tell it from NIXL itself.
"""
import os as _os
import warnings as _warnings
from importlib import metadata as _metadata

# A real NIXL beside this module: its distribution `nixl` owns this package's
# directory (as nixl-cu12 and nixl-cu13 did before NIXL moved them to nixl_cu12/ and
# nixl_cu13/, which its `nixl` loads), and so does b10-nixl, the name of this module's
# earlier builds: files of one overwrite the other's, and uninstalling either deletes
# files of both. Refuse to run in such a mix unless B10_NIXL_ALONGSIDE=1 says it was
# meant (then warn). Every record on the path counts, not only the first, which an
# earlier entry of sys.path would hide. The distribution `nixl` whose version carries
# the local label b10 is this module's own.
_REAL = ("nixl", "nixl-cu12", "nixl-cu13", "b10-nixl")


def _ours(name: str, version: str) -> bool:
    return name == "nixl" and version.partition("+")[2].split(".")[0] == "b10"


def _real_nixl() -> list:
    found = []
    for name in _REAL:
        try:
            versions = [d.version for d in _metadata.distributions(name=name)]
        except Exception:       # a damaged record: say so rather than guess
            versions = [None]
        for v in versions:
            if not isinstance(v, str):
                found.append(f"{name} (unreadable record)")
            elif not _ours(name, v):
                found.append(f"{name} {v}")
    return list(dict.fromkeys(found))   # a folder twice on sys.path: its records once


_found = _real_nixl()
if _found:
    _msg = (f"the module nixl is b10's, but a NIXL distribution is installed beside it "
            f"({', '.join(_found)}): they own or load the same package. Uninstall them, then "
            f"reinstall b10's nixl (client/README.md, 'vLLM, SGLang and Dynamo')")
    if _os.environ.get("B10_NIXL_ALONGSIDE", "") != "1":
        raise ImportError(_msg + "; B10_NIXL_ALONGSIDE=1 imports it anyway")
    _warnings.warn(_msg, RuntimeWarning, stacklevel=2)

from . import _api, _bindings, _utils, logging  # noqa: E402

from ._version import __version__ as _dist_version  # noqa: E402

# As NIXL's package does: each module's public names, here too.
for _mod in (_bindings, _utils, logging, _api):
    for _attr in dir(_mod):
        if not _attr.startswith("_"):
            globals()[_attr] = getattr(_mod, _attr)
del _mod, _attr

# One literal, in _version.py: NIXL's API level, and after "+b10." this adapter's release.
__version__, _, __b10_nixl_version__ = _dist_version.partition("+b10.")
__backend__ = "b10"     # what serves this module: lets a caller tell it from NIXL itself
