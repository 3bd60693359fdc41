"""The version of b10's distribution `mooncake-transfer-engine`: written here and nowhere else.

The Mooncake release whose Transfer Engine behaviour the module implements, then the
local label `+b10.` and this module's own release. pyproject.toml reads this line (so,
once installed, importlib.metadata.version("mooncake-transfer-engine") answers it, as
SGLang's and vLLM's version gates read it), and __init__ exports its two parts as
__version__ and __b10_mooncake_version__. A local label never comes from PyPI, so
`pip show` and a resolver tell it from Mooncake's own.
"""
__version__ = "0.3.13.post1+b10.0.1.0"
