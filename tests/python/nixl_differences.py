"""The differences between b10's module `nixl` and NIXL 1.5.1 that test_nixl_diff.py
and test_nixl_engines_diff.py accept: scenario -> {label in its transcript: why}. A
listed label whose entries no longer differ fails the test too: this list is always
the whole truth.

Only three kinds belong here: where NIXL's behaviour would weaken a guarantee of
b10d (a released or failed transfer never writes afterwards; a notification only
after its bytes landed; once deregistration returns, nothing writes that memory);
the serialised format of descriptor lists; and what b10d cannot do at all. Each
says which, and why. client/README.md ("vLLM, SGLang and Dynamo") shows the same list.
"""
from typing import Dict

SAME_NAME = (
    "impossible over b10d: two agents of one name on one node. b10d knows a node's "
    "agents by name: a transfer's target and a notification's sender are names, and a "
    "second agent of a name would receive the first one's bytes and messages. NIXL "
    "keeps agents apart per process, and lets the second one in.")

OVERLAP = (
    "guarantee (deregistration): b10d holds each registration as one region that no "
    "other overlaps, so that deregister_memory of one says exactly which memory no "
    "transfer writes any more once it returns. NIXL accepts a region overlapping one "
    "registered before; b10's module refuses it (nixlBackendError, as NIXL refuses a "
    "registration its backend cannot make). Registering the very same region again is "
    "accepted, as in NIXL, and counted.")

STALE_REGION = (
    "guarantee (deregistration): add_remote_agent of a peer's newer metadata states the "
    "regions it declares now; a region it deregistered is gone from it, and a transfer "
    "into it is refused at once (nixlNotFoundError, as for any region the peer never "
    "declared). NIXL only adds the regions of newer metadata: it makes the transfer, "
    "which would write memory the peer gave back.")

PICKLED_LIST = (
    "serialised format of descriptor lists: get_serialized_descs gives b10's plain "
    "format (a header, then the rows as little-endian integers), read back without "
    "running anything; NIXL's is pickle, which runs code of the sender's choosing on "
    "deserialize_descs. So bytes NIXL serialised are refused here "
    "(pickle.UnpicklingError, what NIXL raises for bytes it cannot read); a list that "
    "b10's module serialised comes back equal, as in NIXL.")

VERSION = (
    "asked of b10's module by the engines: NIXL's package has no __version__; b10's "
    "answers the NIXL API level it implements (as importlib.metadata.version(\"nixl\") "
    "does for both), so that code reading nixl.__version__ gets NIXL's level, not an "
    "AttributeError. Nothing NIXL itself answers changes.")

RELEASED_RUNNING = (
    "guarantee (a released transfer never writes afterwards): release_xfer_handle of a "
    "running transfer returns only once b10d reported it over, cancelled, so nothing of it "
    "writes the destination after the call returned (where b10d cannot promise that, it "
    "raises nixlBackendError, B10_ERR_UNSETTLED, and keeps the handle). NIXL 1.5.1's UCX "
    "backend returns at once and the transfer goes on: a 64 MiB READ released while "
    "running keeps writing the decode's blocks afterwards, blocks vLLM gives to another "
    "request once it aborted this one. Neither delivers the released transfer's "
    "notification.")

REMOVED_IN_FLIGHT = (
    "guarantee (a failed transfer never writes afterwards; a notification only after its "
    "bytes landed): a transfer running when its peer is removed (remove_remote_agent, "
    "SGLang's metadata refresh) runs to its end in b10, its state says so (DONE once its "
    "bytes landed; its notification delivered then), and only new transfers to the removed "
    "peer are refused (nixlNotFoundError, as in NIXL). NIXL 1.5.1 drops it: "
    "check_xfer_state raises nixlNotFoundError at once, while its bytes may still be "
    "moving, and its notification never comes. An engine told a transfer failed frees or "
    "reuses its blocks; b10 never reports a transfer over while it can still move bytes.")

KNOWN: Dict[str, Dict[str, str]] = {
    "names": {"hasattr __version__": VERSION},
    "agent_names": {"same name twice, second": SAME_NAME},
    "register_memory": {"overlapping": OVERLAP},
    "metadata_updates": {"to deregistered region": STALE_REGION},
    "get_descs_forms": {"deserialize a pickled list": PICKLED_LIST},
    # test_nixl_engines_diff.py: labels are "role: observation".
    "vllm_release_running": {"decode: written after the release returned": RELEASED_RUNNING},
    "sglang_recovery": {
        "prefill: in flight: state after remove": REMOVED_IN_FLIGHT,
        "prefill: in flight handle 0 state": REMOVED_IN_FLIGHT,
        "decode: first agent notifications": REMOVED_IN_FLIGHT,
        "decode: first agent bytes there at each notification": REMOVED_IN_FLIGHT,
    },
}
