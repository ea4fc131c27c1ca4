# SPDX-License-Identifier: Apache-2.0
"""What the audit's parts share: the adapter interface a framework implements, a consumer's
read, the cells and their verdicts, and the values producers write."""
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

COUNT = 1 << 16
"""Bytes per tensor: a 1-D uint8 tensor of COUNT elements."""

CUDA, SIMULATED, CPU = "cuda", "simulated", "cpu"
"""Where an adapter's tensors live in a run: a CUDA device (gated by the driver), the
simulated device (dlsync.testing), or the host (no streams)."""


def payload(seed: int) -> bytes:
    """The values a producer writes in run `seed`: never 0 (what fresh simulated memory
    holds), and different at every index from the values of seed - 1 and seed + 1, so that a
    read of the previous owner's or the next owner's bytes is wrong everywhere."""
    base = (seed * 13) % 251
    return bytes((base + 7 * i) % 251 + 1 for i in range(COUNT))


class Read:
    """What a consumer's ``consume`` returns: its read of the tensor, enqueued on its stream.

    values: the bytes it read, as a ``bytes``-like object, called once every stream has been
    synchronized; None when the adapter cannot read them back (the value check is then left
    out and the verdict rests on the timing and, on the simulated device, the race checker).
    ready: whether the read has completed, without blocking; None: the audit asks the
    adapter's ``marker`` on the consumer's stream instead.
    release: the consumer is done with the imported tensor (its deleter may run); None: the
    audit drops ``keep``, the consumer's own reference.
    keep: what the consumer holds while it reads (its imported tensor)."""

    def __init__(
        self,
        values: Callable[[], Optional[bytes]],
        ready: Optional[Callable[[], bool]] = None,
        release: Optional[Callable[[], Any]] = None,
        keep: Any = None,
    ) -> None:
        self.values = values
        self.ready = ready
        self.keep = keep
        self._release = release

    def release(self) -> Any:
        """Ends the consumer's use of the tensor; what its release call returned, if any."""
        release, self._release = self._release, None
        self.keep = None
        return release() if release is not None else None


class Adapter:
    """A framework as the audit drives it. A new framework subclasses it and overrides what
    it can do; the small part every adapter needs is: ``stream`` (a stream to work on),
    ``make`` (a tensor whose values are written on a stream) and ``consume`` (a tensor read
    on a stream); ``drop`` lets go of a tensor. The rest has defaults, and a cell that needs
    what an adapter lacks is reported "not available" with the reason.

    Streams are the framework's own objects. Work is never waited for inside ``make`` or
    ``consume``: the audit holds the producer's stream while they run, and an adapter that
    blocks the host there is reported as "ordered (host blocked)" at best.

    Class attributes: name (as --producer and --consumer take it), control (it leaves the
    ordering out on purpose, so its stream cells must show a RACE: the audit's negative
    control), reference (it orders with dlsync, so its stream cells must be ordered)."""

    name = ""
    description = ""
    control = False
    reference = False

    # -- set up -------------------------------------------------------------------------
    def open(self, simulated: bool) -> Optional[str]:
        """Prepares the adapter for a run (simulated: the run is on dlsync's simulated
        device). Returns None when it can run, else why not ("not installed: ...", "no GPU:
        ...")."""
        return None

    def device(self) -> str:
        """Where its tensors are in this run: CUDA, SIMULATED or CPU (after open)."""
        return CPU

    def version(self) -> str:
        """The framework and its version, for the report."""
        return self.name

    def attach(self, world: Any) -> None:
        """Called once a run has set up where it runs (the simulated device, or the CUDA
        device), before any stream is made."""

    # -- streams ------------------------------------------------------------------------
    def stream(self) -> Any:
        """A stream of the framework's own that synchronizes with no other (CUDA's
        non-blocking streams); None on a device without streams."""
        return None

    def legacy_stream(self) -> Any:
        """The legacy default stream (what stream=None and stream=1 name on CUDA); None on
        a device without streams."""
        if self.device() == CPU:
            return None
        raise NotImplementedError(f"the {self.name} adapter has no legacy default stream")

    def per_thread_stream(self) -> Any:
        """The calling thread's per-thread default stream (what stream=2 names on CUDA);
        None on a device without streams."""
        if self.device() == CPU:
            return None
        raise NotImplementedError(f"the {self.name} adapter has no per-thread default stream")

    def marker(self, stream: Any) -> Optional[Callable[[], bool]]:
        """Says, without blocking, whether the work enqueued on stream so far has completed
        (an event recorded now and queried later). None: the adapter cannot tell (the
        default off the host), and a cell's verdict rests on the values and, on the
        simulated device, the race checker. On the host the work is done when the call
        that enqueued it returns."""
        if self.device() == CPU:
            return lambda: True
        return None

    def synchronize(self) -> None:
        """Waits for all of the framework's work (called with every gate open)."""

    # -- producer -----------------------------------------------------------------------
    def stage(self, values: bytes, stream: Any) -> Any:
        """What ``make`` needs, prepared before the producer's stream is held (the values on
        the device, a pool warmed so that ``make`` allocates without the host waiting)."""
        return values

    def make(self, staged: Any, stream: Any) -> Any:
        """A tensor of COUNT uint8 whose values (``staged``) are written by work enqueued on
        stream, without waiting for it. Required of a producer."""
        raise NotImplementedError("the adapter is no producer (it has no make)")

    def make_exchange(self, staged: Any, stream: Any) -> Any:
        """The exchange-table cell's tensor: as ``make``, of a type with a DLPack C exchange
        table (``__dlpack_c_exchange_api__``) whose ``current_work_stream`` names stream.
        By default ``make``'s own (a framework whose tensor type has the table)."""
        return self.make(staged, stream)

    def drop(self, tensor: Any) -> None:
        """The producer's own reference to tensor is gone (after the consumer imported it)."""

    def address(self, tensor: Any) -> Optional[int]:
        """The tensor's first byte on the device, to tell whether a pool reused a block."""
        return None

    stream_ordered_pool = False
    """make() allocates from a stream-ordered pool: a block freed on stream S is the next
    allocation on S at once (the release cell's case)."""

    def can_produce(self) -> bool:
        """Whether it can be a producer in this run (it has ``make``)."""
        return type(self).make is not Adapter.make

    # -- consumer -----------------------------------------------------------------------
    def can_consume(self) -> bool:
        """Whether it can be a consumer in this run (it has ``consume``)."""
        return type(self).consume is not Adapter.consume

    def consume(self, tensor: Any, stream: Any) -> Read:
        """Imports tensor (the framework's from_dlpack, with stream current, which passes its
        handle to ``tensor.__dlpack__``) and enqueues a read of all of it on stream. Required
        of a consumer."""
        raise NotImplementedError("the adapter is no consumer (it has no consume)")

    def import_exchange(self, tensor: Any, device: Tuple[int, int], stream: Any,
                        import_tensor: Callable[[Any, Tuple[int, int], Any], Any]) -> Any:
        """The exchange-table cell's import of tensor onto stream, before ``consume`` reads
        the capsule it returns: ``import_tensor`` is dlsync's exchange-table consumer
        (``dlsync.import_tensor``: the tensor through its type's table, the producer's
        current work stream ordered before stream). A control may leave the ordering out."""
        return import_tensor(tensor, device, stream)

    def capture(self, stream: Any, body: Callable[[], Read]) -> Tuple[Any, Read]:
        """Captures body() (which calls ``consume`` on stream) into a graph on stream; returns
        the graph and the captured read, whose values are those of the graph's last launch."""
        raise NotImplementedError("the adapter has no graph capture")

    def launch(self, graph: Any, stream: Any) -> Optional[Callable[[], bool]]:
        """Launches a graph of ``capture`` on stream; returns whether that launch completed
        (None: the adapter cannot tell, as for ``marker``)."""
        raise NotImplementedError("the adapter has no graph capture")


class CellSpec(NamedTuple):
    key: str  # the JSON key
    title: str  # the table's column
    argument: Any  # the stream value forced onto __dlpack__, or a marker below
    consumer_stream: str  # "legacy", "per_thread" or "own"


HANDLE = "handle"  # the consumer's own from_dlpack picks the argument
STREAM_CELLS = (
    CellSpec("None", "stream=None", None, "legacy"),
    CellSpec("-1", "stream=-1", -1, "own"),
    CellSpec("1", "stream=1", 1, "legacy"),
    CellSpec("2", "stream=2", 2, "per_thread"),
    CellSpec("handle", "stream=handle", HANDLE, "own"),
)
OTHER_CELLS = (
    CellSpec("exchange", "exchange table", None, "own"),
    CellSpec("release", "release (stream-ordered pool)", None, "own"),
    CellSpec("capture", "graph capture", None, "own"),
)
CELLS = STREAM_CELLS + OTHER_CELLS
"""Every cell of the table, in its order."""

ORDERED = "ordered"
HOST_BLOCKED = "ordered (host blocked)"
RACE = "RACE"
ERROR = "error"
NOT_AVAILABLE = "not available"
NOT_RUN = "not run"
VERDICTS = (ORDERED, HOST_BLOCKED, RACE, ERROR, NOT_AVAILABLE, NOT_RUN)


class Cell:
    """One cell's verdict (one of VERDICTS), what was seen (detail), and whether a RACE there
    is what DLPack asks for (stream=-1: "no synchronization"), which never fails a run."""

    def __init__(self, key: str, verdict: str, detail: str = "", race_expected: bool = False,
                 runs: Optional[List[Dict[str, Any]]] = None, error_expected: bool = False) -> None:
        self.key = key
        self.verdict = verdict
        self.detail = detail
        self.race_expected = race_expected
        self.error_expected = error_expected  # an error DLPack asks for (a stream on the CPU)
        self.runs = runs or []

    @property
    def failing(self) -> bool:
        """A RACE DLPack does not ask for."""
        return self.verdict == RACE and not self.race_expected

    def text(self) -> str:
        """The table's cell: the verdict, and for an error or a cell that did not run, why."""
        if self.verdict in (ERROR, NOT_AVAILABLE, NOT_RUN) and self.detail:
            return f"{self.verdict}: {self.detail}"
        if self.verdict == RACE and self.race_expected:
            return "RACE (as asked: -1 is no synchronization)"
        return self.verdict

    def to_json(self) -> Dict[str, Any]:
        return {"verdict": self.verdict, "detail": self.detail,
                "race_expected": self.race_expected, "error_expected": self.error_expected,
                "runs": self.runs}

    @property
    def unexpected_error(self) -> bool:
        """An error DLPack does not ask for: the pair (or the harness) failed."""
        return self.verdict == ERROR and not self.error_expected
