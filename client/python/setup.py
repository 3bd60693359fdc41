"""The platform tag of a wheel that carries libb10 (make python-wheel).

A wheel with a shared library inside is no pure-Python wheel: tagged
py3-none-<platform>, pip refuses it on another architecture instead of
installing a library that cannot load. Without libb10 beside the package (a
plain `pip install ./client/python`), the wheel stays pure. The rest of the
metadata is in pyproject.toml.
"""
from pathlib import Path

from setuptools import setup

cmdclass = {}
if any(Path(__file__).resolve().parent.joinpath("b10").glob("libb10.so*")):
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        def finalize_options(self) -> None:
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass)
