# SPDX-License-Identifier: Apache-2.0
"""Builds the test producers against the installed dlsync, as a framework's build does:
the headers and dlsync.pxd from dlsync.get_include(), the library's static copy from
dlsync.get_library_dirs() and dlsync.get_libraries()."""
from Cython.Build import cythonize
from setuptools import Extension, setup

import dlsync

build = dict(
    include_dirs=[dlsync.get_include()],
    library_dirs=dlsync.get_library_dirs(),
    libraries=dlsync.get_libraries(),
)
setup(
    name="dlsync-test-producers",
    ext_modules=cythonize(
        [Extension("cy_producer", ["cy_producer.pyx"], **build)],
        include_path=[dlsync.get_include()],
        quiet=True,
    )
    + [Extension("c_producer", ["c_producer.c"], extra_compile_args=["-Wall", "-Wextra", "-Werror"], **build)],
)
