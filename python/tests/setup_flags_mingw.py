# SPDX-License-Identifier: Apache-2.0
"""python/setup.py's Windows configuration, checked with MinGW-w64 (no Windows Python is at
hand here): setup.py is run as if on a MinGW-built Python, with setuptools.setup replaced
by a recorder, and the C sources it builds that are not the module's own (the library and
its backends, the archive it makes first, and the simulated device) are compiled with its flags and
macros and linked into a DLL with its libraries. A flag MinGW's gcc does not take, a
missing library or a source that does not build on Windows fails here.

Usage: setup_flags_mingw.py SETUP_PY WORK_DIR   (exits 77 when MinGW-w64 is absent)
"""
import os
import runpy
import shutil
import subprocess
import sys

import setuptools

CC = "x86_64-w64-mingw32-gcc"


def configuration(setup_py):
    recorded = {}
    setuptools.setup = lambda **kwargs: recorded.update(kwargs)
    platform, version, argv, cwd = sys.platform, sys.version, sys.argv, os.getcwd()
    sys.platform, sys.version = "win32", sys.version + " [GCC (MinGW-w64)]"
    sys.argv = [setup_py, "--name"]
    os.chdir(os.path.dirname(setup_py))  # its paths are relative to its folder
    try:
        names = runpy.run_path(setup_py, run_name="__main__")
    finally:
        sys.platform, sys.version, sys.argv = platform, version, argv
    return recorded, names, cwd


def main():
    setup_py, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if shutil.which(CC) is None:
        print(f"SKIP: {CC} is not installed")
        return 77
    recorded, names, cwd = configuration(setup_py)
    (extension,) = recorded["ext_modules"]
    module_dir = os.path.join("dlsync", "")
    # The archive BuildExt makes (the library and its backends), then the extension's.
    sources = names["LIBRARY_SOURCES"] + [s for s in extension.sources if not s.startswith(module_dir)]
    assert any("sync/sim/" in s.replace(os.sep, "/") for s in sources), sources
    assert any("sync/backends/" in s.replace(os.sep, "/") for s in sources), sources
    macros = [f"-D{n}" if v is None else f"-D{n}={v}" for n, v in extension.define_macros]
    includes = [f"-I{d}" for d in extension.include_dirs]
    os.makedirs(work, exist_ok=True)
    objects = []
    for source in sources:
        name = os.path.normpath(source).replace(os.sep, "_").lstrip("._")  # sim/stream.c too
        obj = os.path.join(work, name.replace(".c", ".o"))
        command = [CC, *extension.extra_compile_args, *macros, *includes, "-Wall", "-Werror",
                   "-c", source, "-o", obj]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            print(" ".join(command), result.stdout, result.stderr, sep="\n")
            return 1
        objects.append(obj)
    dll = os.path.join(work, "dlsync_sources.dll")
    command = [CC, "-shared", *objects, "-o", dll, *(f"-l{lib}" for lib in extension.libraries)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        print(" ".join(command), result.stdout, result.stderr, sep="\n")
        return 1
    os.chdir(cwd)
    print(f"{len(objects)} sources compiled with {extension.extra_compile_args} and linked "
          f"with {extension.libraries} for Windows (MinGW-w64)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
