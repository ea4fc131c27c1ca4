# SPDX-License-Identifier: Apache-2.0
"""python -m dlsync.audit: see dlsync.audit's docstring and docs/audit.md."""
import sys

from . import main

sys.exit(main())
