# SPDX-License-Identifier: Apache-2.0
"""dlsync.runtime with DL_SYNC_CUDART naming a runtime library (ctest passes the fake
CUDA 13 runtime of tests/runtimes in DL_SYNC_TEST_FAKE_CUDART): the module reports that
file and its version; a path that does not exist is a BufferError naming the path. Each
case runs in a fresh interpreter, since the runtime is found once per process."""
import os
import subprocess
import sys
import unittest

FAKE = os.environ.get("DL_SYNC_TEST_FAKE_CUDART")
PROGRAM = "import dlsync; print(tuple(dlsync.runtime('cudart')))"


def run(cudart):
    env = dict(os.environ, DL_SYNC_CUDART=cudart)
    return subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True)


@unittest.skipUnless(FAKE, "DL_SYNC_TEST_FAKE_CUDART not set (ctest sets it)")
class RuntimeOverride(unittest.TestCase):
    def test_the_named_runtime_is_reported(self):
        result = run(FAKE)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), repr((FAKE, 13000, 13, 0)))

    def test_a_missing_file_is_a_buffer_error_naming_it(self):
        missing = os.path.join(os.path.dirname(FAKE), "no-such-libcudart.so")
        result = run(missing)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("BufferError", result.stderr)
        self.assertIn(missing, result.stderr)


if __name__ == "__main__":
    unittest.main()
