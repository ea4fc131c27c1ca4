# SPDX-License-Identifier: Apache-2.0
"""The package's build backend: setuptools' own (setuptools.build_meta), except where
setuptools has no bdist_wheel of its own (before 70.1) and the wheel package is not
installed, as in the Pythons 3.9 to 3.11 that pyenv and python.org build. There, offline
(pip install --no-build-isolation), setuptools alone cannot make a wheel; this backend
lets setuptools build the package and writes the wheel itself (PEP 427: a zip of the
installed files with a .dist-info folder).
"""
import base64
import csv
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

from setuptools import build_meta as _setuptools

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setuptools_makes_wheels():
    try:
        from setuptools.command.bdist_wheel import bdist_wheel  # noqa: F401 (70.1 and later)
    except ImportError:
        try:
            from wheel.bdist_wheel import bdist_wheel  # noqa: F401
        except ImportError:
            return False
    return True


get_requires_for_build_sdist = _setuptools.get_requires_for_build_sdist
build_sdist = _setuptools.build_sdist


def get_requires_for_build_wheel(config_settings=None):
    if _setuptools_makes_wheels():
        return _setuptools.get_requires_for_build_wheel(config_settings)
    return []  # setuptools would ask for wheel, which this backend does without


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    if _setuptools_makes_wheels():
        return _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)
    with tempfile.TemporaryDirectory(prefix="dlsync-metadata-") as scratch:
        egg_info = _egg_info(scratch)
        return _write_dist_info(egg_info, metadata_directory, tag=None)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if _setuptools_makes_wheels():
        return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
    with tempfile.TemporaryDirectory(prefix="dlsync-wheel-") as scratch:
        tree = os.path.join(scratch, "tree")
        _setup("build", "--build-lib", tree, "egg_info", "--egg-base", scratch)
        egg_info = _only(scratch, ".egg-info")
        dist_info = _write_dist_info(egg_info, tree, tag=_tag())
        return _zip(tree, dist_info, wheel_directory)


def _setup(*arguments):
    """Runs setup.py with this interpreter, in a child (setuptools' commands keep state)."""
    subprocess.run([sys.executable, "setup.py", *arguments], cwd=HERE, check=True,
                   stdout=sys.stderr)


def _only(folder, suffix):
    found = [n for n in os.listdir(folder) if n.endswith(suffix)]
    if len(found) != 1:
        raise RuntimeError(f"dlsync_build: expected one *{suffix} in {folder}, found {found}")
    return os.path.join(folder, found[0])


def _egg_info(scratch):
    _setup("egg_info", "--egg-base", scratch)
    return _only(scratch, ".egg-info")


def _tag():
    """The wheel tag of this interpreter (PEP 425), as bdist_wheel writes it."""
    version = "%d%d" % sys.version_info[:2]
    if sys.implementation.name == "cpython":
        interpreter = "cp" + version
        abi = interpreter + ("d" if sysconfig.get_config_var("Py_DEBUG") else "")
        abi += "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
    else:
        interpreter = sys.implementation.name[:2] + version
        abi = (sysconfig.get_config_var("SOABI") or "none").replace("-", "_").replace(".", "_")
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{interpreter}-{abi}-{platform}"


def _metadata(egg_info):
    with open(os.path.join(egg_info, "PKG-INFO"), encoding="utf-8") as f:
        text = f.read()
    fields = dict(line.split(": ", 1) for line in text.split("\n\n", 1)[0].splitlines() if ": " in line)
    return text, fields["Name"], fields["Version"]


def _write_dist_info(egg_info, folder, tag):
    """name-version.dist-info in folder: METADATA from setuptools' PKG-INFO, WHEEL when tag
    is given, and LICENSE from the checkout or the sdist."""
    text, name, version = _metadata(egg_info)
    dist_info = os.path.join(folder, f"{name.replace('-', '_')}-{version}.dist-info")
    os.makedirs(dist_info, exist_ok=True)
    with open(os.path.join(dist_info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(text)
    if tag is not None:
        with open(os.path.join(dist_info, "WHEEL"), "w", encoding="utf-8") as f:
            f.write(f"Wheel-Version: 1.0\nGenerator: dlsync_build\nRoot-Is-Purelib: false\nTag: {tag}\n")
    for root in (HERE, os.path.dirname(HERE)):
        license_file = os.path.join(root, "LICENSE")
        if os.path.isfile(license_file):
            shutil.copy(license_file, os.path.join(dist_info, "LICENSE"))
            break
    return os.path.basename(dist_info)


def _zip(tree, dist_info, wheel_directory):
    name_version = dist_info[: -len(".dist-info")]
    with open(os.path.join(tree, dist_info, "WHEEL"), encoding="utf-8") as f:
        tag = [line.split(": ", 1)[1].strip() for line in f if line.startswith("Tag: ")][0]
    wheel_name = f"{name_version}-{tag}.whl"
    record_name = f"{dist_info}/RECORD"
    rows = []
    files = sorted(
        os.path.relpath(os.path.join(root, n), tree).replace(os.sep, "/")
        for root, _, names in os.walk(tree) for n in names
    )
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path in files:  # .dist-info sorts after dlsync/, as installers expect it last
            with open(os.path.join(tree, path), "rb") as f:
                data = f.read()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append((path, f"sha256={digest}", str(len(data))))
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (os.stat(os.path.join(tree, path)).st_mode & 0o777) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
        rows.append((record_name, "", ""))
        record = io.StringIO()
        csv.writer(record, lineterminator="\n").writerows(rows)
        wheel.writestr(zipfile.ZipInfo(record_name, date_time=(1980, 1, 1, 0, 0, 0)), record.getvalue())
    return wheel_name
