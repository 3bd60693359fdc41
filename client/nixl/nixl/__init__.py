"""nixl: NIXL's Python API (nixl._api, nixl._bindings, nixl._utils, nixl.logging)
served by b10d.

Installed on purpose, so that vLLM, SGLang and Dynamo move KV cache through b10d
without a line changed; it behaves as NIXL 1.5.1 does (tests/python/test_nixl_diff.py
shows it side by side with NIXL itself, and tests/python/nixl_differences.py lists
where, and why, it does not):

    from nixl._api import nixl_agent, nixl_agent_config
    from nixl._bindings import nixlXferTelemetry, nixlRemoteDisconnectError
    from nixl import nixl_agent, nixl_agent_config, nixl_xfer_handle   # TensorRT-LLM

As NIXL's package does, the package itself carries every public name of its four
modules. It refuses to import beside a real NIXL distribution (nixl, nixl-cu12,
nixl-cu13), which shares its files, unless B10_NIXL_ALONGSIDE=1 (then it warns).

NIXL's package has no __version__; nor has this one. __b10_nixl_version__ is this
module's own version, __backend__ is "b10": a caller can tell it from NIXL itself.
"""
import os as _os
import warnings as _warnings
from importlib import metadata as _metadata

# A real NIXL installed beside b10's shares this package's directory: files of one
# overwrite the other's, and uninstalling either deletes files of both. Refuse to run
# in such a mix unless B10_NIXL_ALONGSIDE=1 says it was meant (then warn).
_REAL = ("nixl", "nixl-cu12", "nixl-cu13")


def _real_nixl() -> list:
    found = []
    for name in _REAL:
        try:
            md = _metadata.metadata(name)
            if "b10" in (md.get("Summary") or ""):
                continue        # this module's own distribution, whatever its name
            found.append(f"{name} {md['Version']}")
        except _metadata.PackageNotFoundError:
            pass
        except Exception:       # a damaged record: say so rather than guess
            found.append(f"{name} (unreadable record)")
    return found


_found = _real_nixl()
if _found:
    _msg = (f"the module nixl is b10's, but a NIXL distribution is installed beside it "
            f"({', '.join(_found)}): both write the same files. Uninstall them, then "
            f"reinstall b10's (README, 'vLLM, SGLang and Dynamo')")
    if _os.environ.get("B10_NIXL_ALONGSIDE", "") != "1":
        raise ImportError(_msg + "; B10_NIXL_ALONGSIDE=1 imports it anyway")
    _warnings.warn(_msg, RuntimeWarning, stacklevel=2)

from . import _api, _bindings, _utils, logging  # noqa: E402

# As NIXL's package does: each module's public names, here too.
for _mod in (_bindings, _utils, logging, _api):
    for _attr in dir(_mod):
        if not _attr.startswith("_"):
            globals()[_attr] = getattr(_mod, _attr)
del _mod, _attr

__b10_nixl_version__ = "0.2.0"
__backend__ = "b10"     # what serves this module: lets a caller tell it from NIXL itself
