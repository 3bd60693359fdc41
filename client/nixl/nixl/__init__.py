"""nixl: NIXL's Python API (nixl._api, nixl._bindings, nixl._utils) served by b10d.

The distribution b10-nixl, installed on purpose beside the b10 package, so that
vLLM, SGLang and Dynamo move KV cache through b10d without a line changed:

    from nixl._api import nixl_agent, nixl_agent_config
    from nixl._bindings import nixlXferTelemetry, nixlRemoteDisconnectError
    from nixl import nixl_agent, nixl_agent_config, nixl_xfer_handle   # TensorRT-LLM

It refuses to import beside a real NIXL distribution (nixl, nixl-cu12, nixl-cu13),
which shares its files, unless B10_NIXL_ALONGSIDE=1 (then it warns).

__version__ is the NIXL API level whose semantics it implements (engines turn
features on by it); __b10_nixl_version__ is this adapter's own.
"""
import os as _os
import warnings as _warnings
from importlib import metadata as _metadata

# A real NIXL installed beside b10-nixl shares this package's directory: files of
# one overwrite the other's, and uninstalling either deletes files of both. Refuse to
# run in such a mix unless B10_NIXL_ALONGSIDE=1 says it was meant (then warn).
_REAL = ("nixl", "nixl-cu12", "nixl-cu13")


def _real_nixl() -> list:
    found = []
    for name in _REAL:
        try:
            found.append(f"{name} {_metadata.version(name)}")
        except _metadata.PackageNotFoundError:
            pass
        except Exception:       # a damaged record: say so rather than guess
            found.append(f"{name} (unreadable record)")
    return found


_found = _real_nixl()
if _found:
    _msg = (f"the module nixl is b10-nixl's, but a NIXL distribution is installed beside it "
            f"({', '.join(_found)}): both write the same files. Uninstall them, then "
            f"reinstall b10-nixl (README, 'vLLM, SGLang and Dynamo')")
    if _os.environ.get("B10_NIXL_ALONGSIDE", "") != "1":
        raise ImportError(_msg + "; B10_NIXL_ALONGSIDE=1 imports it anyway")
    _warnings.warn(_msg, RuntimeWarning, stacklevel=2)

from . import _api, _bindings, _utils  # noqa: E402
from ._api import (DEFAULT_COMM_PORT, nixl_agent, nixl_agent_config,  # noqa: E402
                   nixl_backend_handle, nixl_prepped_dlist_handle, nixl_thread_sync_t,
                   nixl_xfer_handle)
from ._bindings import (nixlBackendError, nixlCancelledError, nixlError,  # noqa: E402
                        nixlInvalidParamError,
                        nixlMismatchError, nixlNoTelemetryError, nixlNotAllowedError,
                        nixlNotFoundError, nixlNotPostedError, nixlNotSupportedError,
                        nixlRegDList, nixlRemoteDisconnectError, nixlRepostActiveError,
                        nixlUnknownError, nixlXferDList, nixlXferTelemetry)

__version__ = "1.4.1"
__b10_nixl_version__ = "0.1.0"
BACKEND = "b10"     # what serves this module: lets a caller tell it from NIXL itself

__all__ = [
    "nixl_agent", "nixl_agent_config", "nixl_xfer_handle", "nixl_prepped_dlist_handle",
    "nixl_thread_sync_t", "nixl_backend_handle", "DEFAULT_COMM_PORT", "nixlXferTelemetry",
    "nixlXferDList", "nixlRegDList",
    "nixlError", "nixlBackendError", "nixlCancelledError", "nixlInvalidParamError",
    "nixlMismatchError", "nixlNoTelemetryError", "nixlNotAllowedError", "nixlNotFoundError",
    "nixlNotPostedError", "nixlNotSupportedError", "nixlRemoteDisconnectError",
    "nixlRepostActiveError", "nixlUnknownError",
]
