#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The binding samples as a user gets them: a fresh virtual environment (today's pip,
# pinned), `pip install samples/nanobind samples/pybind11` from the checkout with
# build isolation (scikit-build-core, nanobind and pybind11 come from PyPI, pinned in each
# sample's pyproject.toml; each sample builds its own static copy of dlsync through
# FetchContent), then their tests on the simulated device and against NumPy (the system's,
# through --system-site-packages) and PyTorch (where scripts/install-python-test-deps.sh put
# it: DL_SYNC_PYPI_SITE; else those tests skip with the reason). Checks that no build wrote
# into the sources. Usage: samples/nanobind/pip_check.sh [PYTHON [SCRATCH]]
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${1:-/usr/bin/python3}
scratch=$(realpath -m "${2:-build/bindings-check}")
pip_pin=pip==26.3
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INPUT=1
export DL_SYNC_PYPI_SITE=${DL_SYNC_PYPI_SITE:-$PWD/build/pypi-site}

snapshot() { find python samples include sync -type f ! -name '*.pyc' -printf '%p %s %T@\n' | LC_ALL=C sort; }
before=$(snapshot)
rm -rf "$scratch"
start=$SECONDS
"$python" -m venv --system-site-packages "$scratch/venv"
venv_python=$scratch/venv/bin/python
"$venv_python" -m pip install --quiet --timeout 60 --retries 2 "$pip_pin"
# The module dlsync as python/tests/pip_install.sh installs it: with the system's setuptools.
"$venv_python" -m pip install --quiet --no-build-isolation ./python
"$venv_python" -m pip install --quiet --timeout 60 --retries 2 ./samples/nanobind ./samples/pybind11
echo "bindings: pip installed the module and both samples in $((SECONDS - start)) s"
[ "$(snapshot)" = "$before" ] ||
  { echo "FAIL: pip install wrote into the sources:" >&2; diff <(echo "$before") <(snapshot) >&2; exit 1; }
for sample in nanobind/test_dlsync_nb pybind11/test_dlsync_pb; do
  (cd "samples/$(dirname $sample)" &&
     PYTHONDONTWRITEBYTECODE=1 "$venv_python" -m unittest -v "$(basename $sample)" 2>&1) |
    tee "$scratch/$(basename $sample).log" | grep -E "skipped|^(FAIL|ERROR)|^Ran|^OK|^FAILED"
  grep -q "^OK" "$scratch/$(basename $sample).log" || { cat "$scratch/$(basename $sample).log"; exit 1; }
done
echo "bindings: built and tested in $((SECONDS - start)) s"
