# SPDX-License-Identifier: Apache-2.0
"""Python code that runs inside a dlsync call and calls dlsync again: the stream argument's
conversions (__index__, __cuda_stream__(), .cuda_stream, .ptr) releasing the very capsule
being released, on this thread and on another; the release thread against interpreter
locks (leaving NullBackend, turning it off while a release starts it, os.fork); a release
kept by a graph. Each test fails on the code before its fix (named in each)."""
import gc
import os
import random
import subprocess
import sys
import textwrap
import threading
import unittest

import dlsync
import dlsync.testing

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA = (2, 0)


def run_python(source, env=None, timeout=120):
    """source in a fresh interpreter with this one's dlsync; (exit code, output). The timeout
    only ends a hung child (a deadlock fails the test), it measures nothing."""
    environment = dict(os.environ)
    environment.update(env or {})
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=environment,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        return "hung", (expired.output or b"").decode(errors="replace")
    return done.returncode, done.stdout.decode(errors="replace")


class ReleaseFromOneOfItsOwnArguments(unittest.TestCase):
    """tensor_release(capsule, stream) where converting stream releases capsule: the
    conversion runs before the capsule is read, so the outer call meets a used capsule
    (TypeError) and the deleter runs once. Before the fix the capsule's pointer was read
    first: two releases of one tensor, free() twice."""

    def hostile_release(self, make_stream, other_thread):
        with dlsync.testing.SimulatedDevice() as sim:
            handle = sim.stream().handle
            deleted = []
            capsule = dlsync.testing._sim.tensor(handle, bytearray(8), lambda: deleted.append(1), None)
            inner = []

            def release_inside():
                def release():
                    inner.append(dlsync.tensor_release(capsule, -1))

                if other_thread:  # the GIL goes to it while this one waits
                    thread = threading.Thread(target=release)
                    thread.start()
                    thread.join()
                else:
                    release()

            with self.assertRaisesRegex(TypeError, "not yet consumed.*used_dltensor_versioned"):
                dlsync.tensor_release(capsule, make_stream(release_inside, handle))
            self.assertEqual(inner, [dlsync.RELEASED_NOW])
            del capsule
            gc.collect()
            self.assertEqual(deleted, [1])

    def each_conversion(self, other_thread):
        class Index:
            def __init__(self, hook, handle):
                self.hook, self.value = hook, -1

            def __index__(self):
                self.hook()
                return self.value

        class Protocol:
            def __init__(self, hook, handle):
                self.hook, self.handle = hook, handle

            def __cuda_stream__(self):
                self.hook()
                return (0, self.handle)

        class TorchLike:
            def __init__(self, hook, handle):
                self.hook, self.handle = hook, handle

            @property
            def cuda_stream(self):
                self.hook()
                return self.handle

        class CupyLike:
            def __init__(self, hook, handle):
                self.hook, self.handle = hook, handle

            @property
            def ptr(self):
                self.hook()
                return self.handle

        class Dynamic:  # found by __getattr__, not on the type
            def __init__(self, hook, handle):
                self.hook, self.handle = hook, handle

            def __getattr__(self, name):
                if name != "cuda_stream":
                    raise AttributeError(name)
                self.hook()
                return self.handle

        for kind in (Index, Protocol, TorchLike, CupyLike, Dynamic):
            with self.subTest(kind.__name__):
                self.hostile_release(kind, other_thread)

    def test_released_by_its_stream_on_this_thread(self):
        self.each_conversion(other_thread=False)

    def test_released_by_its_stream_on_another_thread(self):
        self.each_conversion(other_thread=True)

    def test_an_error_of_the_stream_argument_propagates_and_leaves_the_capsule(self):
        """An __index__ that raises: its exception, not a TypeError about the stream, and the
        capsule untouched (before the fix the exception was swallowed)."""

        class Interrupting:
            def __index__(self):
                raise KeyboardInterrupt

        with dlsync.testing.SimulatedDevice() as sim:
            deleted = []
            capsule = dlsync.testing._sim.tensor(sim.stream(), bytearray(8), lambda: deleted.append(1), None)
            with self.assertRaises(KeyboardInterrupt):
                dlsync.tensor_release(capsule, Interrupting())
            self.assertEqual(deleted, [])
            self.assertEqual(dlsync.tensor_release(capsule, -1), dlsync.RELEASED_NOW)
            self.assertEqual(deleted, [1])

    def test_the_stream_argument_is_converted_once(self):
        calls = []

        class Counted:
            def __index__(self):
                calls.append(1)
                return -1

        with dlsync.testing.SimulatedDevice() as sim:
            capsule = dlsync.testing._sim.tensor(sim.stream(), bytearray(8), lambda: None, None)
            self.assertEqual(dlsync.tensor_release(capsule, Counted()), dlsync.RELEASED_NOW)
            self.assertEqual(calls, [1])


class Adversarial(unittest.TestCase):
    """Import, export, release and the release thread on four threads while the Python code
    dlsync runs inside its calls (__index__, __cuda_stream__(), a class's __getattr__, a
    producer's __dlpack__, __del__, gc callbacks) calls dlsync again: releases of shared
    capsules, exports, polls, the thread turned off and on, collections. Nothing crashes,
    every tensor's deleter runs exactly once, and nothing is left pending."""

    THREADS, ROUNDS = 4, 150

    def test_dlsync_called_again_from_inside_its_calls(self):
        with dlsync.testing.SimulatedDevice() as sim:
            streams = [sim.stream(non_blocking=True) for _ in range(3)]
            handles = [s.handle for s in streams]
            deleted, made = {}, [0]
            shared = []  # capsules any hostile code may release
            lock = threading.Lock()
            errors = []

            def tensor():
                with lock:
                    made[0] += 1
                    key = made[0]
                    deleted[key] = 0

                def on_delete():
                    with lock:
                        deleted[key] += 1

                return dlsync.testing._sim.tensor(handles[key % 3], bytearray(16), on_delete, None)

            def meddle(rng):
                """What the hostile code does: call dlsync again."""
                what = rng.randrange(7)
                if what == 0 and shared:
                    try:
                        dlsync.tensor_release(shared.pop(), rng.choice([-1, handles[0]]))
                    except (TypeError, IndexError):
                        pass  # released meanwhile by another: the capsule is used
                elif what == 1:
                    dlsync.export(CUDA, handles[1], handles[2])
                elif what == 2:
                    dlsync.release_poll()
                elif what == 3:
                    dlsync.release_thread(rng.random() < 0.7)
                elif what == 4:
                    gc.collect()
                elif what == 5:
                    shared.append(tensor())
                else:
                    Dropped(tensor())

            class Dropped:
                """Releases its capsule from __del__ (and from a gc collection: a cycle)."""

                def __init__(self, capsule):
                    self.capsule, self.me = capsule, self

                def __del__(self):
                    try:
                        dlsync.tensor_release(self.capsule, -1)
                    except TypeError:
                        pass

            class Stream:
                def __init__(self, rng, handle):
                    self.rng, self.handle = rng, handle

                def __cuda_stream__(self):
                    meddle(self.rng)
                    return (0, self.handle)

            class Index:
                def __init__(self, rng):
                    self.rng = rng

                def __index__(self):
                    meddle(self.rng)
                    return -1

            class Lookup:  # a stream found through __getattr__
                def __init__(self, rng, handle):
                    self.rng, self.handle = rng, handle

                def __getattr__(self, name):
                    meddle(self.rng)
                    if name == "ptr":
                        return self.handle
                    raise AttributeError(name)

            class Producer:
                def __init__(self, rng):
                    self.rng = rng

                def __getattr__(self, name):  # the exchange table's lookup lands here
                    meddle(self.rng)
                    raise AttributeError(name)

                def __dlpack_device__(self):
                    meddle(self.rng)
                    return CUDA

                def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
                    meddle(self.rng)
                    dlsync.export(CUDA, Stream(self.rng, handles[1]), stream)
                    return tensor()

            def on_gc(phase, info):
                if phase == "stop":
                    dlsync.release_poll()  # from whatever thread collected

            def work(seed):
                rng = random.Random(seed)
                try:
                    for _ in range(self.ROUNDS):
                        stream = rng.choice([Stream(rng, rng.choice(handles)), Index(rng),
                                             Lookup(rng, rng.choice(handles)), rng.choice(handles)])
                        kind = rng.randrange(4)
                        if kind == 0:
                            producer = stream if not isinstance(stream, Index) else handles[1]
                            dlsync.export(CUDA, producer, handles[0])
                        elif kind == 1:
                            consumer = rng.choice([Stream(rng, handles[2]), handles[2]])
                            capsule = dlsync.import_tensor(Producer(rng), CUDA, consumer)
                            try:
                                dlsync.tensor_release(capsule, stream)
                            except TypeError:
                                pass  # the hostile code released it first
                        else:
                            capsule = tensor()
                            shared.append(capsule)
                            try:
                                dlsync.tensor_release(capsule, stream)
                            except TypeError:
                                pass
                except BaseException as error:  # pylint: disable=broad-except
                    errors.append(error)

            gc.callbacks.append(on_gc)
            threads = [threading.Thread(target=work, args=(seed,)) for seed in range(self.THREADS)]
            try:
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            finally:
                gc.callbacks.remove(on_gc)
                dlsync.release_thread(True)
            self.assertEqual(errors, [])
            while shared:  # never released: the capsule gives its tensor back when dropped
                shared.pop()
            gc.collect()
            sim.synchronize()
            dlsync.release_thread(False)
            dlsync.release_poll()
            dlsync.release_thread(True)
            self.assertGreater(made[0], self.THREADS * self.ROUNDS // 2)
            twice = {k: v for k, v in deleted.items() if v != 1}
            self.assertEqual(twice, {}, "tensors whose deleter ran other than once")


class ClassChangedDuringTheLookup(unittest.TestCase):
    def test_a_stream_property_that_deletes_itself_from_its_class(self):
        """The protocol's descriptor is found on the class, borrowed, and its getter (Python)
        deletes it there: dlsync holds it for the call. (A Python getter's frame holds its
        descriptor too, so this passes without the hold; a C descriptor would not.)"""

        class Deleting:
            def __get__(self, obj, owner):
                del owner.cuda_stream
                gc.collect()
                return 5

            def __set__(self, obj, value):
                raise AttributeError("read-only")

        for _ in range(100):
            cls = type("Stream", (), {"cuda_stream": Deleting()})
            self.assertIsNone(dlsync.export(CUDA, cls(), -1))
            self.assertFalse(hasattr(cls, "cuda_stream"))

    def test_the_descriptor_is_held_while_its_getter_runs(self):
        """dlsync holds the descriptor it found on the class while its getter runs, as
        CPython's own attribute lookup does: the getter sees the same count of references
        to it either way (one fewer where dlsync read it borrowed)."""
        counts = []

        class Counting:
            def __get__(self, obj, owner):
                counts.append(sys.getrefcount(self))
                return 5

            def __set__(self, obj, value):
                raise AttributeError("read-only")

        cls = type("Stream", (), {"cuda_stream": Counting()})
        self.assertEqual(cls().cuda_stream, 5)  # CPython's lookup
        self.assertIsNone(dlsync.export(CUDA, cls(), -1))  # dlsync's
        self.assertEqual(len(counts), 2)
        self.assertEqual(counts[1], counts[0], "the descriptor is not held during its getter")


class GraphReleaseStartsTheThread(unittest.TestCase):
    """A release kept by a graph starts the release thread as a deferred one does: the
    deleter runs when the graph goes, without a poll."""

    def test_a_graph_release_runs_its_deleter_without_a_poll(self):
        dlsync.release_thread(False)  # stopped, then allowed again: the release must start it
        dlsync.release_thread(True)
        self.assertFalse(dlsync.release_thread_running())
        with dlsync.testing.SimulatedDevice() as sim:
            stream = sim.stream(non_blocking=True)
            freed = threading.Event()
            capsule = dlsync.testing._sim.tensor(stream, bytearray(8), freed.set, None)
            stream.begin_capture()
            self.assertEqual(dlsync.tensor_release(capsule, stream), dlsync.RELEASE_GRAPH)
            self.assertTrue(dlsync.release_thread_running())
            stream.end_capture()  # the graph is discarded: the tensor is free
            self.assertTrue(freed.wait(60))  # no poll: the thread ran it


class ReleaseThreadAndTheGil(unittest.TestCase):
    def test_leaving_null_backend_while_the_thread_runs_a_python_deleter(self):
        """NullBackend's exit shuts dlsync down, which waits for the deleter the release
        thread runs; that deleter waits for the GIL. Before the fix the exit held the GIL
        throughout: the process hung."""
        code, out = run_python("""
            import sys, threading
            import dlsync, dlsync.testing
            sys.setswitchinterval(100)  # the main thread keeps the GIL unless it lets it go
            entered, gate = threading.Event(), threading.Event()
            def deleter():
                entered.set()
                gate.wait()  # GIL let go; it needs the GIL back to return
            stream = 1  # the legacy default stream: no simulator needed
            with dlsync.testing.NullBackend():
                capsule = dlsync.testing._sim.tensor(stream, bytearray(8), deleter, None)
                assert dlsync.tensor_release(capsule, 5) == dlsync.RELEASE_DEFERRED
                entered.wait()
                gate.set()
            print("left")
        """)
        self.assertEqual((code, out.strip()), (0, "left"))

    def test_turning_the_thread_off_while_releases_start_it(self):
        """release_thread(False) in the autostart's window, between its read of "wanted" and
        its start of the thread: once both returned, the thread is off. A testing pause
        holds the autostart in that window until release_thread(False) finds the policy's
        lock taken, or has returned where the read took no lock (the bug this catches: the
        thread started after it was turned off), so every run meets the window."""
        from dlsync import _dlsync
        with dlsync.testing.NullBackend():
            dlsync.release_thread(False)  # not running, and wanted again: the next autostarts
            dlsync.release_thread(True)
            capsule = dlsync.testing._sim.tensor(1, bytearray(8), lambda: None, None)
            _dlsync._testing_pause_autostart()
            results = []
            releasing = threading.Thread(
                target=lambda: results.append(dlsync.tensor_release(capsule, 5)))
            releasing.start()
            paused = _dlsync._testing_wait_autostart_paused()
            dlsync.release_thread(False)
            releasing.join()
            running = dlsync.release_thread_running()
            dlsync.release_thread(True)
            dlsync.release_poll()
            self.assertTrue(paused, "the release's autostart never reached the pause")
            self.assertEqual(results, [dlsync.RELEASE_DEFERRED])
            self.assertFalse(running, "the release thread runs after release_thread(False)")


class ReleaseThreadAndFork(unittest.TestCase):
    """The release thread is parked around os.fork: a deleter it runs finishes before the
    fork (the child never inherits one half done, nor a lock it holds), the parent gets the
    thread back, the child starts its own at its first deferred release."""

    @unittest.skipUnless(hasattr(os, "register_at_fork"), "no os.fork on this platform")
    def test_a_running_deleter_finishes_before_the_fork(self):
        code, out = run_python("""
            import os, sys, threading
            import dlsync, dlsync.testing
            sys.setswitchinterval(100)
            entered, gate, done = threading.Event(), threading.Event(), []
            def deleter():
                entered.set()
                gate.wait()
                done.append(1)
            stream = 1  # the legacy default stream: no simulator needed
            with dlsync.testing.NullBackend():
                capsule = dlsync.testing._sim.tensor(stream, bytearray(8), deleter, None)
                assert dlsync.tensor_release(capsule, 5) == dlsync.RELEASE_DEFERRED
                entered.wait()
                # Registered after dlsync's, so it runs before it: the deleter may go on now.
                os.register_at_fork(before=gate.set)
                pid = os.fork()
                if pid == 0:
                    ok = done == [1] and not dlsync.release_thread_running()
                    child = dlsync.testing._sim.tensor(stream, bytearray(8), lambda: None, None)
                    ok = ok and dlsync.tensor_release(child, 5) == dlsync.RELEASE_DEFERRED
                    ok = ok and dlsync.release_thread_running()  # the child's own
                    os._exit(0 if ok else 1)
                _, status = os.waitpid(pid, 0)
                print("child", status >> 8)
                # Nothing waited: the parent's thread comes back with its next deferred release.
                again = dlsync.testing._sim.tensor(stream, bytearray(8), lambda: None, None)
                assert dlsync.tensor_release(again, 5) == dlsync.RELEASE_DEFERRED
                print("parent running", dlsync.release_thread_running())
        """)
        self.assertEqual((code, out.split()), (0, ["child", "0", "parent", "running", "True"]), out)

    @unittest.skipUnless(hasattr(os, "register_at_fork"), "no os.fork on this platform")
    def test_the_parent_gets_the_thread_back_at_once_where_releases_wait(self):
        code, out = run_python("""
            import os, threading, warnings
            import dlsync, dlsync.testing
            warnings.simplefilter("ignore", DeprecationWarning)  # the simulator's own threads
            freed = threading.Event()
            with dlsync.testing.SimulatedDevice() as sim:
                a, b = sim.stream(non_blocking=True), sim.stream(non_blocking=True)
                capsule = dlsync.testing._sim.tensor(a, bytearray(8), freed.set, None)
                gate = sim.hold(b)
                assert dlsync.tensor_release(capsule, b) == dlsync.RELEASE_DEFERRED
                assert dlsync.release_thread_running()
                pid = os.fork()
                if pid == 0:
                    os._exit(0 if not dlsync.release_thread_running() else 1)
                _, status = os.waitpid(pid, 0)
                print("child", status >> 8, "parent running", dlsync.release_thread_running())
                gate.release()
                print("freed", freed.wait(60))  # no poll: the thread is back
        """)
        self.assertEqual((code, out.split()),
                         (0, ["child", "0", "parent", "running", "True", "freed", "True"]), out)

    @unittest.skipUnless(sys.version_info >= (3, 12) and hasattr(os, "register_at_fork"),
                         "os.fork warns about threads from Python 3.12")
    def test_no_fork_warning_for_the_release_thread(self):
        code, out = run_python("""
            import os, threading, warnings
            import dlsync, dlsync.testing
            warnings.simplefilter("always")  # printed: the output is then more than one line
            stream = 1  # the legacy default stream: no simulator needed
            freed = threading.Event()
            with dlsync.testing.NullBackend():
                capsule = dlsync.testing._sim.tensor(stream, bytearray(8), freed.set, None)
                assert dlsync.tensor_release(capsule, 5) == dlsync.RELEASE_DEFERRED
                assert dlsync.release_thread_running() and freed.wait(60)  # nothing waits now
                pid = os.fork()
                if pid == 0:
                    os._exit(0)
                os.waitpid(pid, 0)
                print("running", dlsync.release_thread_running())
        """)
        self.assertEqual((code, out.strip()), (0, "running False"), out)


class SimulatorOpenedFromInside(unittest.TestCase):
    """The simulated device's state changes under a lock and is marked while it changes:
    Python code that install runs (the device types' iteration), or another thread
    meanwhile, meets "being opened or closed", never a second install whose backends the
    first would then take for the ones to restore."""

    def test_install_uninstall_and_the_capsule_from_inside_install_are_refused(self):
        sim = dlsync.testing._sim
        inner = []

        class Types:
            def __iter__(self):
                for call in (lambda: sim.install([2]), sim.uninstall, sim.backend_capsule):
                    try:
                        call()
                        inner.append("ran")
                    except RuntimeError as error:
                        inner.append(str(error))
                return iter([2])

        sim.install(Types())
        try:
            self.assertEqual(sim.backend_capsule().__class__.__name__, "PyCapsule")
        finally:
            sim.uninstall()
        self.assertEqual(len(inner), 3, inner)
        for message in inner:
            self.assertIn("being opened or closed", message)
        with self.assertRaisesRegex(RuntimeError, "not open"):
            sim.backend_capsule()


class ModuleInitialization(unittest.TestCase):
    """Multi-phase initialization: each module object is executed (its functions are its
    own), the process's state is built once, and interpreters with a GIL of their own are
    refused cleanly."""

    def test_a_module_imported_again_is_a_new_module_that_works(self):
        code, out = run_python("""
            import importlib, sys
            import dlsync._dlsync as first
            del sys.modules["dlsync._dlsync"]
            second = importlib.import_module("dlsync._dlsync")
            assert second is not first
            assert second.export.__self__ is second and first.export.__self__ is first
            class S:
                def __cuda_stream__(self):
                    return (0, 5)
            for m in (first, second):
                m.export((1, 0), S(), None)
                assert m.stream_to_arg((2, 0), S()) == 5
                assert m._sim.race_count() == 0
            print("ok")
        """)
        self.assertEqual((code, out.strip()), (0, "ok"), out)

    def test_keyword_names_are_interned_at_initialization(self):
        """The names a call by keyword is matched against are interned when the module is
        executed, not at a first call by keyword (which would write shared state in a
        call: a free-threaded interpreter's race), and a call by keyword then matches."""
        code, out = run_python("""
            import dlsync._dlsync as m
            before = m._testing_keyword_names_interned()  # no call by keyword yet
            assert m.stream_to_arg(device=(2, 0), stream=5) == 5
            name = "".join(["str", "eam"])  # a keyword that is not the interned string
            assert m.stream_to_arg(**{"device": (2, 0), name: 5}) == 5
            print(before)
        """)
        self.assertEqual((code, out.strip()), (0, "True"), out)

    @unittest.skipUnless(sys.version_info >= (3, 12), "interpreters with their own GIL: 3.12 and later")
    def test_an_interpreter_with_its_own_gil_is_refused(self):
        code, out = run_python("""
            try:
                import _interpreters as interpreters
            except ImportError:
                import _xxsubinterpreters as interpreters
            interp = interpreters.create()  # isolated: its own GIL
            try:
                failure = interpreters.run_string(interp, "import dlsync._dlsync")
            except Exception as error:  # 3.12 raises what the interpreter raised
                failure = error
            print("refused" if "ImportError" in str(failure) else f"imported: {failure!r}")
        """)
        self.assertEqual((code, out.strip()), (0, "refused"), out)


class ReleaseThreadOptOut(unittest.TestCase):
    SOURCE = """
        import dlsync, dlsync.testing
        stream = 1  # the legacy default stream: no simulator needed
        with dlsync.testing.NullBackend():
            capsule = dlsync.testing._sim.tensor(stream, bytearray(8), lambda: None, None)
            assert dlsync.tensor_release(capsule, 5) == dlsync.RELEASE_DEFERRED
            print("running", dlsync.release_thread_running(), "polled", dlsync.release_poll())
    """

    def test_the_environment_turns_the_autostart_off(self):
        code, out = run_python(self.SOURCE, {"DL_SYNC_RELEASE_THREAD": "0"})
        self.assertEqual((code, out.split()), (0, ["running", "False", "polled", "1"]), out)

    def test_negative_control_the_autostart_without_it(self):
        code, out = run_python(self.SOURCE, {"DL_SYNC_RELEASE_THREAD": "1"})
        self.assertEqual((code, out.split()[:2]), (0, ["running", "True"]), out)

    def test_a_value_that_is_no_choice_is_refused_at_import(self):
        code, out = run_python("import dlsync", {"DL_SYNC_RELEASE_THREAD": "no"})
        self.assertNotEqual(code, 0)
        self.assertIn("DL_SYNC_RELEASE_THREAD='no': expected 0 or 1", out)


if __name__ == "__main__":
    unittest.main()
