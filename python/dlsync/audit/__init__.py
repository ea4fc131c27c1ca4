# SPDX-License-Identifier: Apache-2.0
"""The ordering audit a framework runs in its own CI: does a consumer ever read a tensor
before its producer's write, or after the producer gave its memory to someone else?

::

    python -m dlsync.audit                        # every framework found, on the GPU
    python -m dlsync.audit --simulated            # CPU-only CI: the simulated device
    python -m dlsync.audit --producer torch --consumer cupy,jax --json audit.json

For each producer -> consumer pair it runs every cell of the table and reports each as
"ordered", "ordered (host blocked)", "RACE" or "error" (with the message), or "not
available" (with why):

- stream=None, -1, 1, 2: the producer's ``__dlpack__`` is called with that value while the
  consumer reads on the stream the value names (legacy default, its own, legacy default,
  per-thread default); stream=handle: the consumer's own from_dlpack picks the value. -1
  asks for no synchronization, so a RACE there is what DLPack asks for and fails nothing.
- exchange table: through the producer's DLPack C exchange table
  (``type(x).__dlpack_c_exchange_api__``) with dlsync's exchange-table consumer, where
  both exist.
- release: the consumer is done with a tensor of a stream-ordered pool while its read is
  still pending, and the producer allocates and writes again on its stream.
- graph capture: the consumer imports and reads inside a graph capture, then launches it.

On a GPU a producer's stream is held by the driver itself (cuStreamWaitValue32 on host-
mapped memory, no compiler needed), so an unordered consumer reads before the write every
time; on the simulated device (``--simulated``) by dlsync.testing's hold, with the race
checker beside the values. The command exits 1 on a RACE DLPack does not ask for (0 with
--allow-race), 3 when no pair could run, 4 with --require-gpu when no pair ran on a GPU,
2 on a usage error. docs/audit.md says more.

A framework without a built-in adapter writes one: a subclass of ``Adapter`` with
``stream``, ``make`` and ``consume`` (see its docstring), passed to ``run`` or named on the
command line with ``--adapter module:attribute``.
"""
import importlib
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ._adapters import built_in, capsule_memory
from ._cells import Options, run_pair
from ._core import (
    CELLS,
    COUNT,
    CPU,
    CUDA,
    ERROR,
    HOST_BLOCKED,
    NOT_AVAILABLE,
    NOT_RUN,
    ORDERED,
    RACE,
    SIMULATED,
    Adapter,
    Cell,
    Read,
    payload,
)
from ._gates import world as _world
from ._report import PairResult, Report

__all__ = [
    "CELLS",
    "COUNT",
    "CPU",
    "CUDA",
    "ERROR",
    "HOST_BLOCKED",
    "NOT_AVAILABLE",
    "NOT_RUN",
    "ORDERED",
    "RACE",
    "SIMULATED",
    "Adapter",
    "Cell",
    "PairResult",
    "Read",
    "Report",
    "adapters",
    "capsule_memory",
    "main",
    "payload",
    "run",
]

AdapterLike = Union[str, Adapter]


def adapters(extra: Iterable[Adapter] = ()) -> Dict[str, Adapter]:
    """The built-in adapters and extra ones (a new instance of each built-in), by name."""
    found: Dict[str, Adapter] = {}
    for adapter in list(built_in()) + list(extra):
        if not adapter.name:
            raise ValueError(f"dlsync.audit: the adapter {adapter!r} has no name")
        found[adapter.name] = adapter
    return found


def _resolve(names: Optional[Sequence[AdapterLike]], known: Dict[str, Adapter]) -> Optional[List[Adapter]]:
    if names is None:
        return None
    chosen = []
    for name in names:
        if isinstance(name, Adapter):
            known.setdefault(name.name, name)
            chosen.append(known[name.name])
        elif name in known:
            chosen.append(known[name])
        else:
            raise ValueError(f"dlsync.audit: no adapter named {name!r} (there are: "
                             f"{', '.join(sorted(known))})")
    return chosen


def run(
    producers: Optional[Sequence[AdapterLike]] = None,
    consumers: Optional[Sequence[AdapterLike]] = None,
    *,
    pairs: Optional[Sequence[Tuple[AdapterLike, AdapterLike]]] = None,
    simulated: bool = False,
    cells: Optional[Sequence[str]] = None,
    runs: int = 2,
    window: float = 0.1,
    extra: Iterable[Adapter] = (),
    progress: Any = None,
) -> Report:
    """Audits every producer against every consumer (names or Adapter instances; None: every
    adapter that can run here, the controls left out), or the given pairs, and returns the
    Report. simulated: on dlsync's simulated device. cells: the keys of CELLS to run (None:
    all). runs: gated runs per cell; window: seconds a held producer is given before the gate
    opens. progress: a file each pair is announced on as it starts."""
    if not simulated:
        # A memory wait blocks the hardware queue its stream is mapped to, and work of
        # another stream on that queue waits behind it, which would hide a race (cuda.h:
        # "CUDA tasks that are (even indirectly) ordered by these APIs should also have that
        # order expressed with CUDA-visible dependencies"): as many queues as the driver
        # gives, read when a context is created (a process that made one keeps its number;
        # the controls show it).
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    known = adapters(extra)
    keys = [spec.key for spec in CELLS]
    if cells is not None:
        unknown = [c for c in cells if c not in keys]
        if unknown:
            raise ValueError(f"dlsync.audit: no cell {unknown[0]!r} (there are: {', '.join(keys)})")
        keys = [k for k in keys if k in cells]
    if runs < 1 or window <= 0:
        raise ValueError("dlsync.audit: runs must be at least 1 and window positive")
    chosen_pairs: List[Tuple[Adapter, Adapter]] = []
    if pairs is not None:
        for producer, consumer in pairs:
            p = _resolve([producer], known)
            c = _resolve([consumer], known)
            assert p is not None and c is not None
            chosen_pairs.append((p[0], c[0]))
    given_producers = _resolve(producers, known)
    given_consumers = _resolve(consumers, known)
    involved = {a.name: a for pair in chosen_pairs for a in pair}
    for adapter in (given_producers or []) + (given_consumers or []):
        involved[adapter.name] = adapter
    if pairs is None and (given_producers is None or given_consumers is None):
        involved.update({a.name: a for a in known.values() if not a.control})
    reasons = {name: adapter.open(simulated) for name, adapter in involved.items()}
    frameworks = {name: (reason or involved[name].version()) for name, reason in reasons.items()}
    if pairs is None:
        runnable = [a for a in involved.values() if reasons[a.name] is None]
        producer_list = given_producers or [a for a in runnable if not a.control and a.can_produce()]
        consumer_list = given_consumers or [a for a in runnable if not a.control and a.can_consume()]
        # Every combination whose tensors meet (the same device), unless both lists were given.
        chosen_pairs = [(p, c) for p in producer_list for c in consumer_list
                        if (given_producers is not None and given_consumers is not None) or
                        p.device() == c.device()]
    return _audit(chosen_pairs, reasons, frameworks, simulated, keys, runs, window, progress)


def _audit(chosen: List[Tuple[Adapter, Adapter]], reasons: Dict[str, Optional[str]],
           frameworks: Dict[str, str], simulated: bool, keys: List[str], runs: int,
           window: float, progress: Any) -> Report:
    where = _world(simulated)
    results: List[PairResult] = []
    exchange_import = importlib.import_module("dlsync").import_tensor
    options = Options(exchange_import, runs=runs, window=window, cells=keys)
    try:
        for adapter in {a.name: a for pair in chosen for a in pair}.values():
            if reasons.get(adapter.name) is None:
                adapter.attach(where)
        for producer, consumer in chosen:
            result = PairResult(producer.name, consumer.name, "", control=producer.control,
                                reference=producer.reference)
            results.append(result)
            why = reasons.get(producer.name) or reasons.get(consumer.name)
            if why is None and not producer.can_produce():
                why = f"{producer.name} is no producer here"
            if why is None and not consumer.can_consume():
                why = f"{consumer.name} is no consumer here"
            if why is None and producer.device() != consumer.device():
                why = (f"{producer.name}'s tensors are on {producer.device()}, {consumer.name} "
                       f"reads on {consumer.device()}")
            if why is not None:
                result.not_run = why
                continue
            result.device = producer.device()
            if progress is not None:
                print(f"dlsync.audit: {result.title} ({result.device})", file=progress, flush=True)
            result.cells = run_pair(where, producer, consumer, options)
    finally:
        where.close()
    return Report(where.kind, where.describe(), frameworks, results, runs, window, keys)


def _load_adapters(specs: Sequence[str]) -> List[Adapter]:
    """--adapter module:attribute: an Adapter, an Adapter subclass, or a sequence of them."""
    loaded: List[Adapter] = []
    for spec in specs:
        module_name, _, attribute = spec.partition(":")
        if not module_name or not attribute:
            raise ValueError(f"dlsync.audit: --adapter {spec!r}: expected module:attribute")
        value = getattr(importlib.import_module(module_name), attribute)
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, type) and issubclass(item, Adapter):
                item = item()
            if not isinstance(item, Adapter):
                raise ValueError(f"dlsync.audit: --adapter {spec!r} names {item!r}, which is "
                                 "no dlsync.audit.Adapter")
            loaded.append(item)
    return loaded


def _names(values: Optional[List[str]]) -> Optional[List[str]]:
    if not values:
        return None
    return [name for value in values for name in value.split(",") if name]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command: ``python -m dlsync.audit --help``."""
    import argparse
    import json

    parser = argparse.ArgumentParser(
        prog="python -m dlsync.audit",
        description="The ordering audit: every cell of the stream-synchronization table for "
                    "each producer -> consumer pair, as ordered, ordered (host blocked), RACE "
                    "or error.")
    parser.add_argument("--simulated", action="store_true",
                        help="run on dlsync's simulated device (CPU-only CI)")
    parser.add_argument("--producer", action="append", metavar="NAMES",
                        help="producer adapters, comma-separated (default: every one that runs here)")
    parser.add_argument("--consumer", action="append", metavar="NAMES",
                        help="consumer adapters, comma-separated (default: every one that runs here)")
    parser.add_argument("--pair", action="append", metavar="PRODUCER:CONSUMER",
                        help="one pair (repeatable), instead of every producer x consumer")
    parser.add_argument("--cells", metavar="KEYS",
                        help="cells to run, comma-separated, of: " +
                             ", ".join(spec.key for spec in CELLS) + " (write --cells=-1,...)")
    parser.add_argument("--adapter", action="append", default=[], metavar="MODULE:ATTRIBUTE",
                        help="load adapters of your own (an Adapter, its class, or a list)")
    parser.add_argument("--runs", type=int, default=2, help="gated runs per cell (default 2)")
    parser.add_argument("--window", type=float, default=0.1,
                        help="seconds a held producer is given before its gate opens (default 0.1)")
    parser.add_argument("--json", metavar="FILE", help="write the findings as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="write the table as Markdown")
    parser.add_argument("--allow-race", action="store_true", help="exit 0 on a RACE too")
    parser.add_argument("--require-gpu", action="store_true",
                        help="exit 4 when no pair ran on a GPU (a GPU job on a runner without one)")
    parser.add_argument("--list", action="store_true",
                        help="list the adapters and whether each can run here, then exit")
    options = parser.parse_args(argv)
    try:
        extra = _load_adapters(options.adapter)
        if options.list:
            for name, adapter in adapters(extra).items():
                reason = adapter.open(options.simulated)
                where = f"runs here ({adapter.device()})" if reason is None else reason
                print(f"{name}: {adapter.description or adapter.version()}; {where}")
            return 0
        pairs = None
        if options.pair:
            pairs = []
            for text in options.pair:
                producer, sep, consumer = text.partition(":")
                if not sep or not producer or not consumer:
                    parser.error(f"--pair {text!r}: expected PRODUCER:CONSUMER")
                pairs.append((producer, consumer))
        report = run(_names(options.producer), _names(options.consumer), pairs=pairs,
                     simulated=options.simulated, cells=_names([options.cells] if options.cells else None),
                     runs=options.runs, window=options.window, extra=extra, progress=sys.stderr)
    except ValueError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    print(report.table())
    print()
    for line in report.summary_lines(options.allow_race, options.require_gpu):
        print(line)
    if options.markdown:
        with open(options.markdown, "w", encoding="utf-8") as out:
            out.write(report.table() + "\n")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as out:
            json.dump(report.to_json(options.allow_race, options.require_gpu), out, indent=1)
            out.write("\n")
    return report.exit_status(options.allow_race, options.require_gpu)
