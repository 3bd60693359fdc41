"""nixl: NIXL's Python API (nixl._api, nixl._bindings, nixl._utils) served by b10d.

The distribution b10-nixl, installed on purpose beside the b10 package, so that
vLLM, SGLang and Dynamo move KV cache through b10d without a line changed:

    from nixl._api import nixl_agent, nixl_agent_config
    from nixl._bindings import nixlXferTelemetry, nixlRemoteDisconnectError
    from nixl import nixl_agent, nixl_agent_config, nixl_xfer_handle   # TensorRT-LLM

__version__ is the NIXL API level whose semantics it implements (engines turn
features on by it); __b10_nixl_version__ is this adapter's own.
"""
from . import _api, _bindings, _utils
from ._api import (DEFAULT_COMM_PORT, nixl_agent, nixl_agent_config,
                   nixl_backend_handle, nixl_prepped_dlist_handle, nixl_thread_sync_t,
                   nixl_xfer_handle)
from ._bindings import (nixlBackendError, nixlCancelledError, nixlError,
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
