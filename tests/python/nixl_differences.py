"""The differences between b10's module `nixl` and NIXL 1.5.1 that test_nixl_diff.py
accepts: scenario -> {label in its transcript: why}. A listed label whose entries no
longer differ fails the test too: this list is always the whole truth.

Only three kinds belong here: where NIXL's behaviour would weaken a guarantee of
b10d (a released or failed transfer never writes afterwards; a notification only
after its bytes landed; once deregistration returns, nothing writes that memory);
the serialised format of descriptor lists; and what b10d cannot do at all. Each
says which, and why. README ("vLLM, SGLang and Dynamo") shows the same list.
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

KNOWN: Dict[str, Dict[str, str]] = {
    "names": {"hasattr __version__": VERSION},
    "agent_names": {"same name twice, second": SAME_NAME},
    "register_memory": {"overlapping": OVERLAP},
    "metadata_updates": {"to deregistered region": STALE_REGION},
    "get_descs_forms": {"deserialize a pickled list": PICKLED_LIST},
}
