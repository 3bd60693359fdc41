"""The version of b10's distribution `nixl`: written here and nowhere else.

NIXL's API level whose behaviour the module implements, then the local label
`+b10.` and this adapter's own release. pyproject.toml reads this line (so, once
installed, importlib.metadata.version("nixl") answers it: SGLang, Ray and Dynamo
read NIXL's version there), and __init__ exports its two parts as __version__ and
__b10_nixl_version__. A requirement on the public part (`nixl==1.5.1`, `nixl>=1.2`)
is met by it, as PEP 440 ignores a local label there; a local label never comes from
PyPI, so `pip show nixl` and a resolver tell it from a real NIXL.

Raising the API level is one edit, here, once the module behaves as that NIXL does.
"""
__version__ = "1.5.1+b10.0.2.0"
