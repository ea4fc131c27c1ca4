# SPDX-License-Identifier: Apache-2.0
"""The Python layer driven by random programs (hypothesis.stateful) on the simulated device:
producers with an exchange table (table_producer.py) and with a __dlpack__ of their own
(arrays.py) write on their streams; consumers import through the table and through
__dlpack__ (dlsync.import_tensor) or order several producers at once (dlsync.Group), read on
their own streams, release, drop capsules unreleased, try to release or read a released
capsule again, poll, turn the release thread on and off, and import from several threads at
once. Every step runs on one of a few Python threads (each
with its own current stream of the framework) under a time limit.

Oracles, none of them dlsync's code: every value read is the value written (after a
synchronize); the race checker finds nothing; a capsule is consumed once (a second release,
or a read after the release, is a TypeError); each tensor a producer handed out is deleted exactly once, and nothing
else; every array's reference count is back where it started; no step outlives its time
limit (a deadlock). The control (the table's bare conversion in place of the import) must be
caught.

Budget: DL_SYNC_STATEFUL_EXAMPLES programs of up to DL_SYNC_STATEFUL_STEPS steps, derandomized
(CI runs a fixed set); DL_SYNC_STATEFUL_SECONDS=N runs new random programs for N seconds
instead (local and nightly runs). hypothesis comes, pinned, from the folder DL_SYNC_PYPI_SITE
names (scripts/install-python-test-deps.sh installs it); without it the test skips, saying so.
"""
import gc
import os
import queue
import sys
import threading
import time
import unittest

SITE = os.environ.get("DL_SYNC_PYPI_SITE", "")
if SITE and os.path.isdir(SITE):
    sys.path.insert(0, SITE)

import numpy as np  # noqa: E402

import dlsync  # noqa: E402
import dlsync.testing  # noqa: E402
import table_producer as tp  # noqa: E402
from arrays import Array  # noqa: E402
from dlsync import _dlsync  # noqa: E402

try:
    from hypothesis import HealthCheck, settings, strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
    MISSING = None
except ImportError as error:  # the reason the test skips
    MISSING = (f"hypothesis is not installed ({error}); scripts/install-python-test-deps.sh installs it, "
               "pinned, into the folder DL_SYNC_PYPI_SITE names")

CUDA = (2, 0)
STEPS_MADE = {}  # rule name: how many times it ran, over every program of the process


def made(name):
    STEPS_MADE[name] = STEPS_MADE.get(name, 0) + 1
SIZE = 256
THREADS = 3
STEP_LIMIT_S = 60  # a step that takes longer is a deadlock (a step takes milliseconds)
EXAMPLES = int(os.environ.get("DL_SYNC_STATEFUL_EXAMPLES", "60"))
STEPS = int(os.environ.get("DL_SYNC_STATEFUL_STEPS", "40"))
SECONDS = float(os.environ.get("DL_SYNC_STATEFUL_SECONDS", "0"))


class Workers:
    """THREADS Python threads that run one step at a time, handed over in program order."""

    def __init__(self):
        self.inboxes = [queue.Queue() for _ in range(THREADS)]
        self.threads = [threading.Thread(target=self._serve, args=(q,), daemon=True) for q in self.inboxes]
        for t in self.threads:
            t.start()

    @staticmethod
    def _serve(inbox):
        while True:
            job = inbox.get()
            if job is None:
                return
            action, done = job
            try:
                result = (True, action())
            except BaseException as error:  # re-raised on the caller's thread
                result = (False, error)
            del job, action  # the step's objects (a capsule) are not this thread's to keep
            done.put(result)
            del result, done

    def run(self, thread, action, what):
        done = queue.Queue()
        self.inboxes[thread].put((action, done))
        try:
            ok, value = done.get(timeout=STEP_LIMIT_S)
        except queue.Empty:
            raise AssertionError(f"deadlock: {what} on thread {thread} still runs after {STEP_LIMIT_S} s")
        if not ok:
            raise value
        return value

    def all_at_once(self, actions, what):
        """Each thread's action at the same time (a barrier lets them go together)."""
        barrier = threading.Barrier(len(actions))
        dones = []
        for t, action in enumerate(actions):
            done = queue.Queue()
            dones.append(done)
            self.inboxes[t].put((lambda a=action: (barrier.wait(STEP_LIMIT_S), a())[1], done))
        results = []
        for t, done in enumerate(dones):
            try:
                ok, value = done.get(timeout=STEP_LIMIT_S)
            except queue.Empty:
                raise AssertionError(f"deadlock: {what} on thread {t} still runs after {STEP_LIMIT_S} s")
            if not ok:
                raise value
            results.append(value)
        return results

    def stop(self):
        for q in self.inboxes:
            q.put(None)
        for t in self.threads:
            t.join(STEP_LIMIT_S)


def through_dlsync(array, consumer):
    return dlsync.import_tensor(array, CUDA, consumer)


class Produced:
    """An array a producer wrote once, on its stream, with value."""

    def __init__(self, array, value, stream, table):
        self.array, self.value, self.stream, self.table = array, value, stream, table
        self.references = None  # taken once only this holds the array

    def count_references(self):
        self.references = sys.getrefcount(self.array)


class Held:
    """A capsule a consumer imported: where it was read (None: not read) and what it saw."""

    def __init__(self, capsule, produced, consumer, seen):
        self.capsule, self.produced, self.consumer, self.seen = capsule, produced, consumer, seen


if MISSING is None:

    class Exchanges(RuleBasedStateMachine):
        """One program: a simulated device, its producers and consumers, several threads."""

        importer = staticmethod(through_dlsync)


        def __init__(self):
            super().__init__()
            tp.reset()
            self.deleted_before = tp.FRAMEWORK.deleted
            self.live_before = set(tp.FRAMEWORK.live)  # a failed program's, not this one's
            self.sim = dlsync.testing.SimulatedDevice(jitter_us=20, seed=11).open()
            self.producers = [self.sim.stream(), self.sim.stream(non_blocking=True)]
            self.consumers = [self.sim.stream(non_blocking=True), self.sim.stream(non_blocking=True)]
            self.workers = Workers()
            self.arrays = []  # every Produced, for the reference counts at the end
            self.reads = []  # (seen, value) of every read made
            self.taken = 0  # tensors the table handed out through an import
            self.unreleased = []  # Held not yet released or dropped
            self.dropped_read = 0  # read table capsules dropped: given back when the device closes

        # -- producers ---------------------------------------------------------------
        @rule(table=st.booleans(), stream=st.integers(0, 1), value=st.integers(1, 250),
              thread=st.integers(0, THREADS - 1))
        def produce(self, table, stream, value, thread):
            made("produce")
            producer = self.producers[stream]
            data = np.zeros(SIZE, np.uint8)
            array = tp.TableArray(data, CUDA) if table else Array(data, device=CUDA, stream=producer)
            self.workers.run(thread, lambda: self.sim.write(producer, data, value), "a producer's write")
            produced = Produced(array, value, producer, table)
            del array
            produced.count_references()
            self.arrays.append(produced)

        # -- consumers ---------------------------------------------------------------
        def _import(self, produced, consumer):
            """On the calling thread: the producer's current stream is the one it wrote on."""
            with tp.use_stream(produced.stream):
                return type(self).importer(produced.array, consumer)

        @rule(pick=st.integers(0, 1 << 16), consumer=st.integers(0, 1), read=st.booleans(),
              thread=st.integers(0, THREADS - 1))
        def import_(self, pick, consumer, read, thread):
            if not self.arrays:  # something to import first
                self.produce(pick % 2 == 0, pick % 2, 1 + pick % 250, thread)
            made("import")
            produced = self.arrays[pick % len(self.arrays)]
            stream = self.consumers[consumer]
            capsule = self.workers.run(thread, lambda: self._import(produced, stream), "an import")
            self.taken += produced.table
            seen = None
            if read:
                seen = np.zeros(SIZE, np.uint8)
                self.workers.run(thread, lambda: self.sim.copy(stream, capsule, seen), "the consumer's read")
                self.reads.append((seen, produced.value))
            self.unreleased.append(Held(capsule, produced, stream if read else None, seen))

        @precondition(lambda self: self.unreleased)
        @rule(pick=st.integers(0, 1 << 16), thread=st.integers(0, THREADS - 1), on_consumer=st.booleans())
        def release(self, pick, thread, on_consumer):
            made("release")
            h = self.unreleased[pick % len(self.unreleased)]
            # A capsule read on a stream is released on it; one never read, anywhere.
            stream = self._release_stream(h, self.consumers[0] if on_consumer else -1)
            status = self.workers.run(thread, lambda: dlsync.tensor_release(h.capsule, stream), "a release")
            allowed = (dlsync.RELEASED_NOW, dlsync.RELEASED_ORDERED, dlsync.RELEASE_DEFERRED)
            assert status in allowed, f"tensor_release answered {status}"
            if not h.produced.table:  # NumPy's capsule: a CPU tensor, nothing pending
                assert status == dlsync.RELEASED_NOW, f"a CPU tensor's release answered {status}"
            self.unreleased.remove(h)
            try:  # consumed once: a second release, from any thread, is refused
                self.workers.run((thread + 1) % THREADS, lambda: dlsync.tensor_release(h.capsule, -1),
                                 "a second release")
            except TypeError as error:
                assert "not yet consumed" in str(error), str(error)
            else:
                raise AssertionError("a capsule was released twice")
            try:  # nor read again: its tensor may be gone
                self.sim.copy(self.consumers[0], h.capsule, np.zeros(SIZE, np.uint8))
            except TypeError as error:
                assert "not yet consumed" in str(error), str(error)
            else:
                raise AssertionError("a released capsule was read")

        @rule(picks=st.lists(st.integers(0, 1 << 16), min_size=1, max_size=3), consumer=st.integers(0, 1),
              thread=st.integers(0, THREADS - 1))
        def group(self, picks, consumer, thread):
            """A call of several arguments: one group of their producers' streams, then reads
            of their memory on the consumer's stream (no capsule: the arrays lend it)."""
            if not self.arrays:
                return
            made("group")
            stream = self.consumers[consumer]
            chosen = [self.arrays[pick % len(self.arrays)] for pick in picks]

            def action():
                with dlsync.Group(CUDA, stream) as group:
                    for p in chosen:
                        group.add(p.stream)
                seen = []
                for p in chosen:
                    seen.append(np.zeros(SIZE, np.uint8))
                    self.sim.copy(stream, p.array.data, seen[-1])
                return seen

            seen = self.workers.run(thread, action, "a group's wait")
            self.reads += [(buffer, p.value) for buffer, p in zip(seen, chosen)]

        @staticmethod
        def _release_stream(h, unread):
            """Where h is released: NumPy's capsule is a CPU tensor (no stream: None); a read
            capsule on its consumer's stream; one never read on unread."""
            if not h.produced.table:
                return None
            return h.consumer if h.consumer is not None else unread

        @precondition(lambda self: self.unreleased)
        @rule(pick=st.integers(0, 1 << 16))
        def drop(self, pick):
            """The capsule goes unreleased: its destructor gives the tensor back (a read one
            only when the device closes: the simulator holds it for its copy)."""
            made("drop")
            h = self.unreleased[pick % len(self.unreleased)]
            self.unreleased.remove(h)
            self.dropped_read += h.produced.table and h.consumer is not None
            del h.capsule
            gc.collect()

        @rule(thread=st.integers(0, THREADS - 1),
              what=st.sampled_from(["poll", "synchronize", "release thread on", "release thread off"]))
        def host(self, thread, what):
            """The host's own steps (one rule, so that the exchanges get most of the steps)."""
            made(what)
            if what == "poll":
                self.workers.run(thread, dlsync.release_poll, "release_poll")
            elif what == "synchronize":  # then every read so far has its value
                self.sim.synchronize()
                for seen, value in self.reads:
                    self.sim.host_read(seen)
                    assert (seen == value).all(), f"read {seen[:4]}..., expected {value}"
            else:
                run = what.endswith("on")
                self.workers.run(thread, lambda: dlsync.release_thread(run), what)

        @precondition(lambda self: len(self.arrays) < 40)
        @rule(value=st.integers(1, 250))
        def threads_at_once(self, value):
            """Every thread writes, imports through the table, reads and releases at once, each
            on its own producer and consumer stream (created here)."""
            made("threads_at_once")
            streams = [(self.sim.stream(), self.sim.stream(non_blocking=True)) for _ in range(THREADS)]
            produced = [Produced(tp.TableArray(np.zeros(SIZE, np.uint8), CUDA), value + t, streams[t][0], True)
                        for t in range(THREADS)]
            for p in produced:
                p.count_references()
            seen = [np.zeros(SIZE, np.uint8) for _ in range(THREADS)]

            def one(t):
                p, (producer, consumer) = produced[t], streams[t]

                def action():
                    self.sim.write(producer, p.array.data, p.value)
                    capsule = self._import(p, consumer)
                    self.sim.copy(consumer, capsule, seen[t])
                    return dlsync.tensor_release(capsule, consumer)

                return action

            statuses = self.workers.all_at_once([one(t) for t in range(THREADS)], "imports from every thread")
            for status in statuses:
                assert status in (dlsync.RELEASED_NOW, dlsync.RELEASED_ORDERED, dlsync.RELEASE_DEFERRED), status
            for t in range(THREADS):
                self.arrays.append(produced[t])
                self.reads.append((seen[t], produced[t].value))
            self.taken += THREADS

        @invariant()
        def no_race(self):
            assert self.sim.race_count == 0, f"race: {self.sim.race_report()}"

        def teardown(self):
            try:
                for h in list(self.unreleased):
                    dlsync.tensor_release(h.capsule, self._release_stream(h, -1))
                self.unreleased = []
                dlsync.release_thread(True)
                self.sim.synchronize()
                for seen, value in self.reads:
                    self.sim.host_read(seen)
                    assert (seen == value).all(), f"read {seen[:4]}..., expected {value}"
                deadline = time.monotonic() + 20  # the release thread may run some
                expected = self.taken - self.dropped_read
                while tp.FRAMEWORK.deleted - self.deleted_before < expected and time.monotonic() < deadline:
                    dlsync.release_poll()
                    time.sleep(0.001)
                self.sim.close()  # raises on a race; drops the capsules its copies held
                self.reads = []
                gc.collect()
                deleted = tp.FRAMEWORK.deleted - self.deleted_before
                assert deleted == self.taken, f"{deleted} deleters ran for {self.taken} tensors handed out"
                left = set(tp.FRAMEWORK.live) - self.live_before
                assert not left, f"{len(left)} tensors never given back"
                for p in self.arrays:
                    got = sys.getrefcount(p.array)
                    assert got == p.references, f"an array's reference count is {got}, was {p.references}"
            finally:
                self.sim.close(check=False)
                self.workers.stop()
                dlsync.release_thread(True)

    class BareConversion(Exchanges):
        """The control: the table's bare conversion, no ordering."""

        @staticmethod
        def importer(array, consumer):
            if isinstance(array, tp.TableArray):
                return _dlsync._exchange_bare_import(array)
            return dlsync.import_tensor(array, CUDA, consumer)


def budget(examples, derandomize, report_multiple_bugs=True):
    return settings(max_examples=examples, stateful_step_count=STEPS, deadline=None, derandomize=derandomize,
                    database=None, suppress_health_check=list(HealthCheck), print_blob=True,
                    report_multiple_bugs=report_multiple_bugs)


def messages(error):
    """The messages of error, of the errors it groups and of those it was raised during."""
    found = [str(error)]
    for inner in getattr(error, "exceptions", ()):
        found += messages(inner)
    if error.__context__ is not None:
        found += messages(error.__context__)
    return found


@unittest.skipIf(MISSING is not None, MISSING or "")
class Stateful(unittest.TestCase):
    def test_random_programs_keep_every_oracle(self):
        start = time.monotonic()
        if SECONDS > 0:  # new programs until the time is up
            runs = 0
            while time.monotonic() - start < SECONDS:
                run_state_machine_as_test(Exchanges, settings=budget(20, False))
                runs += 1
            print(f"\n{runs * 20} random programs in {time.monotonic() - start:.0f} s", file=sys.stderr)
        else:
            run_state_machine_as_test(Exchanges, settings=budget(EXAMPLES, True))
            print(f"\n{EXAMPLES} programs of up to {STEPS} steps in {time.monotonic() - start:.1f} s",
                  file=sys.stderr)
        print("steps made: " + ", ".join(f"{n} {c}" for n, c in sorted(STEPS_MADE.items())), file=sys.stderr)

    def test_negative_control_the_bare_conversion_is_caught(self):
        try:
            run_state_machine_as_test(BareConversion, settings=budget(EXAMPLES, True, report_multiple_bugs=False))
        except BaseException as error:  # AssertionError, or a group of them with the teardown's
            self.assertIn("race", " ".join(messages(error)))
        else:
            self.fail("the bare conversion in place of dlsync's import was not caught")


if __name__ == "__main__":
    unittest.main()
