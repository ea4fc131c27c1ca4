# SPDX-License-Identifier: Apache-2.0
"""Puts the PyPI packages scripts/install-python-test-deps.sh installed ahead of the
system's, in this process only: the folder DL_SYNC_PYPI_SITE names (the pinned tables of
apache-tvm-ffi and cuda-core; the CMake build passes build/pypi-site) and its peers/
(PyTorch, JAX and NumPy 2 from PyPI, a link to the install cached outside the clone).
Import it before numpy, torch or jax. MISSING says what is not there, for skip reasons."""
import os
import sys

SITE = os.environ.get("DL_SYNC_PYPI_SITE", "")
PEERS = os.path.join(SITE, "peers") if SITE else ""
INSTALL = "scripts/install-python-test-deps.sh installs it"
TAG = "cp%d%d" % sys.version_info[:2]
try:
    with open(os.path.join(SITE, ".python-tag")) as _f:
        FOR = _f.read().strip()
except OSError:
    FOR = ""
if not SITE:
    MISSING = "DL_SYNC_PYPI_SITE is not set"
elif FOR != TAG:  # wheels of another interpreter: not importable here
    MISSING = f"{SITE} holds wheels for {FOR or 'an unknown Python'}, this is {TAG}"
else:
    MISSING = "" if os.path.isdir(PEERS) else f"{PEERS} is not there"
    for _folder in (PEERS, SITE):  # SITE ends up first: its pins win over the peers' dependencies
        if os.path.isdir(_folder) and _folder not in sys.path:
            sys.path.insert(0, _folder)
