"""Builds the extension dlsync._dlsync with the library compiled in (its C sources sit
next to this folder: ../sync, ../include), so `pip install ./python` needs nothing but a
C compiler, the Python headers and setuptools. The CUDA runtime backend is built when the
toolkit's headers are found ($CUDA_HOME, else /usr/local/cuda), as CMake's AUTO does."""
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


def cuda_backend():
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if not os.path.exists(os.path.join(home, "include", "cuda_runtime_api.h")):
        return {}
    libdir = next((d for d in (os.path.join(home, "lib64"), os.path.join(home, "lib")) if os.path.isdir(d)), None)
    return {
        "sources": [rel(ROOT, "sync", "backends", "cuda.c")],
        "define_macros": [("DL_SYNC_WITH_CUDA", None)],
        "include_dirs": [os.path.join(home, "include")],
        "library_dirs": [libdir] if libdir else [],
        "runtime_library_dirs": [libdir] if libdir else [],
        "libraries": ["cudart"],
    }


cuda = cuda_backend()
library_sources = sorted(glob.glob(os.path.join(ROOT, "sync", "*.c")) + glob.glob(os.path.join(ROOT, "sync", "sim", "*.c")))
extension = Extension(
    "dlsync._dlsync",
    sources=sorted(rel(p) for p in glob.glob(os.path.join(HERE, "dlsync", "*.c")))
    + [rel(p) for p in library_sources]
    + cuda.get("sources", []),
    include_dirs=[rel(ROOT, "include")] + cuda.get("include_dirs", []),
    define_macros=cuda.get("define_macros", []),
    library_dirs=cuda.get("library_dirs", []),
    runtime_library_dirs=cuda.get("runtime_library_dirs", []),
    libraries=cuda.get("libraries", []) + ["pthread"],
    extra_compile_args=["-std=c11", "-fvisibility=hidden"],
    extra_link_args=["-Wl,--version-script=" + rel(HERE, "dlsync", "exports.map")],
)

setup(version=version(), ext_modules=[extension])
