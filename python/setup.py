# SPDX-License-Identifier: Apache-2.0
"""Builds the Python package dlsync: the extension dlsync._dlsync with the library and the
simulated device compiled in, and, for producers written in C, C++ or Cython, the C
headers, dlsync.pxd and dlsync_testing.h (dlsync.get_include()) and the static library
libdlsync.a (dlsync.get_library_dirs()). `pip install` needs nothing but a C compiler, the
Python headers and setuptools: the CUDA and HIP backends find their runtime at run time.

The library's sources (include/, sync/) and LICENSE sit one level up in a checkout and
next to this file in an sdist, which carries copies of them. Building writes nothing next
to this file: the build folders are temporary unless --build-base / --egg-base say
otherwise.
"""
import atexit
import glob
import importlib.util
import os
import re
import shutil
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools before 70.1: the wheel package's, where it is installed
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:  # none: build_backend/dlsync_build.py writes the wheel
        bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
# What the sdist copies in from a checkout, as folders next to setup.py.
LIBRARY_TREES = ("include", "sync")
LICENSE_FILES = ("LICENSE",)
# And the reader of the CMake source lists that this file uses.
SDIST_FILES = LICENSE_FILES + (os.path.join("scripts", "amalgamate.py"),)


def library_root():
    """Where include/ and sync/ are: next to this file (an sdist), or one level up."""
    for root in (HERE, os.path.dirname(HERE)):
        if os.path.isfile(os.path.join(root, "include", "dlsync", "version.h")):
            return root
    raise SystemExit(
        "dlsync: the library sources include/ and sync/ are neither next to setup.py (an "
        "sdist) nor one level up (a checkout of dlsync)"
    )


ROOT = library_root()


def rel(path):
    return os.path.relpath(path, HERE)


def version():
    with open(os.path.join(ROOT, "include", "dlsync", "version.h")) as f:
        text = f.read()
    return ".".join(
        re.search(rf"DL_SYNC_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")
    )


def cmake_sources(folder, variable):
    """The sources folder/CMakeLists.txt lists in variable: the CMake build's list is the one
    list, read by scripts/amalgamate.py (for the one-file form and Meson too)."""
    spec = importlib.util.spec_from_file_location(
        "dlsync_amalgamate", os.path.join(ROOT, "scripts", "amalgamate.py"))
    amalgamate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(amalgamate)
    return [rel(p) for p in amalgamate.cmake_sources(os.path.join(ROOT, folder, "CMakeLists.txt"), variable)]


# The library with its runtime backends (they open libcuda / libamdhip64 at run time, so
# nothing GPU is needed to build), and the simulated device behind dlsync.testing.
LIBRARY_SOURCES = cmake_sources("sync", "DL_SYNC_SOURCES")
SIM_SOURCES = cmake_sources(os.path.join("sync", "sim"), "DL_SYNC_SIM_SOURCES")
# The headers a producer compiles against (the simulator's stays inside the module).
PUBLIC_HEADERS = [
    p for p in sorted(glob.glob(os.path.join(ROOT, "include", "dlsync", "*.h")))
    if os.path.basename(p) != "sim.h"
]
WINDOWS = sys.platform == "win32"
# MSVC takes C11 as /std:c11, with its C11 atomics behind a flag (Visual Studio 2022 17.5
# and later); elsewhere (gcc, clang, MinGW) symbols stay hidden.
MSVC = WINDOWS and "GCC" not in sys.version
CFLAGS = ["/std:c11", "/experimental:c11atomics"] if MSVC else ["-std=c11", "-fvisibility=hidden"]
# dlsync's own build: its API is hidden in a static copy (dlsync/version.h). MinGW: the C99
# printf (%zu, %lld), as the CMake build has it.
MACROS = [("DL_SYNC_BUILDING_LIBRARY", None)]
if WINDOWS and not MSVC:
    MACROS.append(("__USE_MINGW_ANSI_STDIO", "1"))
# The library asks Windows for its module list (psapi); the simulated device behind
# dlsync.testing needs pthreads: winpthreads with MinGW (MSVC has none to link).
if WINDOWS:
    SYSTEM_LIBRARIES = ["psapi"] if MSVC else ["psapi", "pthread"]
else:
    SYSTEM_LIBRARIES = ["pthread", "dl"]
# The extension exports only its init function and the tensor-event deleters (exports.map):
# a version script where the linker is GNU ld's or lld's for ELF; on Windows only what is
# marked for export leaves a DLL (there, no copy recognises another's tensors by name).
LINK_ARGS = [] if WINDOWS else ["-Wl,--version-script=" + os.path.relpath(os.path.join(HERE, "dlsync", "exports.map"), HERE)]


class BuildPy(build_py):
    """Also lays the C headers into the package (dlsync/include/dlsync/)."""

    def run(self):
        super().run()
        package = os.path.join(HERE if getattr(self, "editable_mode", False) else self.build_lib, "dlsync")
        target = os.path.join(package, "include", "dlsync")
        self.mkpath(target)
        for header in PUBLIC_HEADERS:
            self.copy_file(header, os.path.join(target, os.path.basename(header)))


class BuildExt(build_ext):
    """Builds libdlsync.a into the package (dlsync/lib/), then the extension over it."""

    def build_extensions(self):
        package = os.path.dirname(self.get_ext_fullpath("dlsync._dlsync"))
        lib_dir = os.path.join(package, "lib")
        # Deep enough that ../sync/x.c from a checkout lands inside build_temp (made first:
        # the compiler is given objects/../sync/x.o).
        objects_dir = os.path.join(self.build_temp, "libdlsync", "objects")
        self.mkpath(objects_dir)
        objects = self.compiler.compile(
            LIBRARY_SOURCES,
            output_dir=objects_dir,
            macros=MACROS,
            include_dirs=[rel(os.path.join(ROOT, "include"))],
            extra_postargs=CFLAGS,
            depends=PUBLIC_HEADERS,
        )
        self.mkpath(lib_dir)
        self.compiler.create_static_lib(objects, "dlsync", output_dir=lib_dir)
        self.archive = os.path.join(lib_dir, self.compiler.library_filename("dlsync"))
        for extension in self.extensions:
            extension.extra_objects = list(extension.extra_objects or []) + [self.archive]
        super().build_extensions()

    def copy_extensions_to_source(self):
        """--inplace and editable installs: the archive goes next to the extension too."""
        super().copy_extensions_to_source()
        package = self.get_finalized_command("build_py").get_package_dir("dlsync")
        self.mkpath(os.path.join(package, "lib"))
        self.copy_file(self.archive, os.path.join(package, "lib", os.path.basename(self.archive)))


class Sdist(sdist):
    """An sdist that builds on its own: the library's include/ and sync/ and LICENSE are
    copied next to setup.py; the release tree is made in a temporary folder."""

    def make_release_tree(self, base_dir, files):
        # Files outside this folder (the checkout's ../sync/*.c, the temporary egg-info)
        # are not the sdist's; the trees below replace them.
        inside = [f for f in files if not os.path.isabs(f) and not f.startswith(os.pardir + os.sep)]
        super().make_release_tree(base_dir, inside)
        for tree in LIBRARY_TREES:
            source = os.path.join(ROOT, tree)
            for path in sorted(glob.glob(os.path.join(source, "**", "*"), recursive=True)):
                if os.path.isfile(path) and (os.path.splitext(path)[1] in (".c", ".h")
                                             or os.path.basename(path) == "CMakeLists.txt"):
                    dest = os.path.join(base_dir, tree, os.path.relpath(path, source))
                    self.mkpath(os.path.dirname(dest))
                    self.copy_file(path, dest)
        for name in SDIST_FILES:
            path = os.path.join(ROOT, name)
            if os.path.isfile(path):
                self.mkpath(os.path.dirname(os.path.join(base_dir, name)))
                self.copy_file(path, os.path.join(base_dir, name))

    def make_distribution(self):
        scratch = tempfile.mkdtemp(prefix="dlsync-sdist-")
        try:
            base_dir = self.distribution.get_fullname()
            self.make_release_tree(os.path.join(scratch, base_dir), self.filelist.files)
            base_name = os.path.join(os.path.abspath(self.dist_dir), base_dir)
            self.archive_files = []
            for fmt in self.formats:
                archive = self.make_archive(
                    base_name, fmt, root_dir=scratch, base_dir=base_dir, owner=self.owner, group=self.group
                )
                self.archive_files.append(archive)
                self.distribution.dist_files.append(("sdist", "", archive))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


COMMANDS = {"build_py": BuildPy, "build_ext": BuildExt, "sdist": Sdist}
if bdist_wheel is not None:

    class BdistWheel(bdist_wheel):
        """Puts LICENSE into the wheel's .dist-info from a checkout too (one level up).

        The paths are relative to this folder (the build's working folder): setuptools 77
        and later copy each to .dist-info/licenses/<path>, which an absolute path would make
        the file itself ("are the same file"), and take a path with ../ by its base name.
        """

        @property
        def license_paths(self):
            paths = [os.path.join(ROOT, name) for name in LICENSE_FILES]
            return [rel(p) for p in paths if os.path.isfile(p)]

    COMMANDS["bdist_wheel"] = BdistWheel


# Temporary build and egg-info folders (the command line and setup.cfg still win).
BUILD_BASE = tempfile.mkdtemp(prefix="dlsync-build-")
atexit.register(shutil.rmtree, BUILD_BASE, True)

def long_description():
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        return f.read()


setup(
    name="dlsync",
    version=version(),
    description="Stream synchronization around DLPack exchange on CUDA and ROCm, for __dlpack__ in Python",
    long_description=long_description(),
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    license="Apache-2.0",
    classifiers=[
        "License :: OSI Approved :: Apache Software License",
        "Programming Language :: C",
        "Programming Language :: Cython",
        "Programming Language :: Python :: 3",
        "Operating System :: POSIX :: Linux",
        "Typing :: Typed",
    ],
    packages=["dlsync", "dlsync.audit"],
    # Python files, stubs and the built extension, and for producers in C, C++ or Cython
    # the headers, dlsync.pxd and libdlsync.a (BuildPy and BuildExt add the library's
    # headers and the archive); the extension's own C sources stay in the sdist.
    include_package_data=False,
    package_data={"dlsync": ["*.pyi", "py.typed", "include/*.pxd", "include/*.h"]},
    ext_modules=[
        Extension(
            "dlsync._dlsync",
            sources=sorted(rel(p) for p in glob.glob(os.path.join(HERE, "dlsync", "*.c"))) + SIM_SOURCES,
            depends=sorted(rel(p) for p in glob.glob(os.path.join(HERE, "dlsync", "*.h"))) + PUBLIC_HEADERS,
            # sync/: the driver gate of dlsync.audit asks the library's driver loading
            # for entry points (sync/backends/cuda_driver_entry.h).
            include_dirs=[rel(os.path.join(ROOT, "include")), rel(os.path.join(ROOT, "sync"))],
            define_macros=MACROS,
            libraries=SYSTEM_LIBRARIES,
            extra_compile_args=CFLAGS,
            extra_link_args=LINK_ARGS,
        )
    ],
    cmdclass=COMMANDS,
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
