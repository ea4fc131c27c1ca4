"""Builds the extension dlsync._dlsync with the library compiled in (its C sources sit
next to this folder: ../sync, ../include), so `pip install ./python` needs nothing but a
C compiler, the Python headers and setuptools: the CUDA and HIP backends find their
runtime at run time."""
import glob
import os
import re

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def rel(*parts):
    return os.path.relpath(os.path.join(*parts), HERE)


def version():
    text = open(os.path.join(ROOT, "include", "dlsync", "version.h")).read()
    return ".".join(re.search(rf"DL_SYNC_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH"))


# The library, its runtime backends (they open libcudart / libamdhip64 at run time, so
# nothing GPU is needed to build) and the simulated device behind dlsync.testing.
library_sources = sorted(
    glob.glob(os.path.join(ROOT, "sync", "*.c"))
    + glob.glob(os.path.join(ROOT, "sync", "backends", "*.c"))
    + glob.glob(os.path.join(ROOT, "sync", "sim", "*.c"))
)
extension = Extension(
    "dlsync._dlsync",
    sources=sorted(rel(p) for p in glob.glob(os.path.join(HERE, "dlsync", "*.c")))
    + [rel(p) for p in library_sources],
    include_dirs=[rel(ROOT, "include")],
    libraries=["pthread", "dl"],
    extra_compile_args=["-std=c11", "-fvisibility=hidden"],
    extra_link_args=["-Wl,--version-script=" + rel(HERE, "dlsync", "exports.map")],
)

setup(version=version(), ext_modules=[extension])
