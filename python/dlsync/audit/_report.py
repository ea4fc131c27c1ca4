# SPDX-License-Identifier: Apache-2.0
"""The audit's findings: a table for the terminal (Markdown), JSON for CI, the summary
lines scripts read, and the exit status."""
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._core import (
    CELLS,
    CUDA,
    ERROR,
    HOST_BLOCKED,
    NOT_AVAILABLE,
    NOT_RUN,
    ORDERED,
    RACE,
    STREAM_CELLS,
    VERDICTS,
    Cell,
)

FORMAT = 1  # the JSON's layout: a new key is compatible, a changed one bumps it
JUDGED_STREAM_KEYS = tuple(s.key for s in STREAM_CELLS if s.argument != -1)
"""The stream cells a control must fail and a reference must pass (-1 asks for no order)."""


class PairResult:
    """One producer -> consumer pair: its cells, or why it did not run."""

    def __init__(self, producer: str, consumer: str, device: str,
                 cells: Optional[Dict[str, Cell]] = None, not_run: str = "",
                 control: bool = False, reference: bool = False) -> None:
        self.producer, self.consumer, self.device = producer, consumer, device
        self.cells = cells or {}
        self.not_run = not_run
        self.control, self.reference = control, reference

    @property
    def title(self) -> str:
        return f"{self.producer} -> {self.consumer}"

    def to_json(self) -> Dict[str, Any]:
        return {"producer": self.producer, "consumer": self.consumer, "device": self.device,
                "control": self.control, "reference": self.reference,
                "not_run": self.not_run or None,
                "cells": {key: cell.to_json() for key, cell in self.cells.items()}}


def _short(text: str, limit: int = 72) -> str:
    text = text.replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Report:
    """What one audit found. ``exit_status(allow_race, require_gpu)`` is the command's: 0,
    1 (a RACE DLPack does not ask for), 3 (nothing could run), 4 (--require-gpu and no pair
    ran on a GPU)."""

    def __init__(self, device: str, world: Dict[str, Any], frameworks: Dict[str, str],
                 pairs: List[PairResult], runs: int, window: float,
                 cells: Sequence[str]) -> None:
        self.device, self.world, self.frameworks = device, world, frameworks
        self.pairs, self.runs, self.window = pairs, runs, window
        self.cell_keys = list(cells)

    # -- counts --------------------------------------------------------------------------
    def cells(self) -> List[Tuple[PairResult, Cell]]:
        return [(pair, cell) for pair in self.pairs for cell in pair.cells.values()]

    def failing(self) -> List[Tuple[PairResult, Cell]]:
        """The cells with a RACE that DLPack does not ask for."""
        return [(pair, cell) for pair, cell in self.cells() if cell.failing]

    def unexpected_errors(self) -> List[Tuple[PairResult, Cell]]:
        """The error cells DLPack does not ask for (a framework's or the harness's failure)."""
        return [(pair, cell) for pair, cell in self.cells() if cell.unexpected_error]

    def gpu_pairs(self) -> int:
        """How many pairs ran on a GPU (not the host, not the simulated device)."""
        return sum(1 for p in self.pairs if p.cells and p.device == CUDA)

    def counts(self) -> Dict[str, int]:
        counts = {verdict: 0 for verdict in VERDICTS}
        for _, cell in self.cells():
            counts[cell.verdict] += 1
        counts["RACE as asked"] = sum(1 for _, c in self.cells() if c.verdict == RACE and c.race_expected)
        counts["error as asked"] = sum(1 for _, c in self.cells() if c.verdict == ERROR and c.error_expected)
        counts["error unexpected"] = len(self.unexpected_errors())
        counts["pairs"] = len(self.pairs)
        counts["pairs run"] = sum(1 for p in self.pairs if not p.not_run)
        return counts

    def _judged(self, which: str) -> Tuple[int, int]:
        """(stream cells judged, how many went as they must) over the control or the
        reference producers' pairs."""
        judged = passed = 0
        for pair in self.pairs:
            if not getattr(pair, which):
                continue
            for key in JUDGED_STREAM_KEYS:
                cell = pair.cells.get(key)
                if cell is None or cell.verdict not in (ORDERED, HOST_BLOCKED, RACE):
                    continue
                judged += 1
                passed += cell.verdict == RACE if which == "control" else cell.verdict != RACE
        return judged, passed

    def exit_status(self, allow_race: bool = False, require_gpu: bool = False) -> int:
        if not any(pair.cells for pair in self.pairs):
            return 3
        if self.failing() and not allow_race:
            return 1
        return 4 if require_gpu and not self.gpu_pairs() else 0

    # -- output --------------------------------------------------------------------------
    def summary_lines(self, allow_race: bool = False, require_gpu: bool = False) -> List[str]:
        counts = self.counts()
        lines = [f"dlsync.audit: device: {self.device}; gate: {self.world.get('gate', '')}"]
        if self.device == CUDA and not self.gpu_pairs():
            lines.append(f"dlsync.audit: no GPU: {counts['pairs run']} CPU pairs audited")
        lines += [f"dlsync.audit: warning: {w}" for w in self.world.get("warnings", [])]
        lines.append("dlsync.audit: frameworks: " +
                     ", ".join(f"{name}: {what}" for name, what in self.frameworks.items()))
        verdicts = ", ".join(f"{v} {counts[v]}" for v in VERDICTS)
        lines.append(f"dlsync.audit: summary: pairs {counts['pairs run']} of {counts['pairs']}, "
                     f"cells {len(self.cells())}: {verdicts} (RACE as stream=-1 asks: "
                     f"{counts['RACE as asked']}; error as DLPack asks: {counts['error as asked']})")
        unexpected = self.unexpected_errors()
        if unexpected:
            names = "; ".join(f"{p.title} {c.key}" for p, c in unexpected[:8])
            more = f" and {len(unexpected) - 8} more" if len(unexpected) > 8 else ""
            lines.append(f"dlsync.audit: unexpected errors: {len(unexpected)}: {names}{more}")
        judged, raced = self._judged("control")
        if any(p.control for p in self.pairs):
            lines.append(f"dlsync.audit: controls: stream cells {judged}, RACE {raced}")
        judged, ordered = self._judged("reference")
        if any(p.reference for p in self.pairs):
            lines.append(f"dlsync.audit: reference: stream cells {judged}, ordered {ordered}")
        status = self.exit_status(allow_race, require_gpu)
        failing = self.failing()
        if status == 3:
            lines.append("dlsync.audit: exit 3: no pair could run here (each says why)")
        elif status == 4:
            lines.append("dlsync.audit: exit 4: no pair ran on a GPU (--require-gpu)")
        elif failing:
            names = "; ".join(f"{p.title} {c.key}" for p, c in failing[:8])
            more = f" and {len(failing) - 8} more" if len(failing) > 8 else ""
            lines.append(f"dlsync.audit: exit {status}: {len(failing)} RACE cell(s): {names}{more}"
                         + (" (allowed by --allow-race)" if allow_race else
                            " (--allow-race exits 0)"))
        else:
            lines.append("dlsync.audit: exit 0: no RACE that DLPack does not ask for")
        return lines

    def table(self) -> str:
        """The Markdown table, a legend, and every cell's detail below it."""
        titles = {spec.key: spec.title for spec in CELLS}
        keys = [k for k in self.cell_keys]
        head = "| producer -> consumer | device | " + " | ".join(titles[k] for k in keys) + " |"
        rows = [head, "|" + "---|" * (len(keys) + 2)]
        details: List[str] = []
        for pair in self.pairs:
            if pair.not_run:
                rows.append(f"| {pair.title} | {pair.device or '-'} | " +
                            " | ".join([_short(f"{NOT_RUN}: {pair.not_run}", 120)] +
                                       [NOT_RUN] * (len(keys) - 1)) + " |")
                continue
            texts = []
            for key in keys:
                cell = pair.cells.get(key)
                texts.append(_short(cell.text()) if cell is not None else NOT_RUN)
                if cell is not None and cell.detail and cell.verdict != NOT_AVAILABLE:
                    details.append(f"- {pair.title}, {titles[key]}: {cell.verdict}: {cell.detail}")
            rows.append(f"| {pair.title} | {pair.device} | " + " | ".join(texts) + " |")
        legend = (f"{self.runs} gated runs per cell after one ungated warm-up, window "
                  f"{self.window * 1000:.0f} ms; gate: {self.world.get('gate', '')}. "
                  "ordered: the consumer never finished while the producer was held and read "
                  "the producer's values; ordered (host blocked): the same, but the call "
                  "blocked the host until a timer opened the gate; RACE: the consumer finished "
                  "while the producer was held, read other values, or the race checker found "
                  "an unordered access; error: the call raised. Consumers run on the stream "
                  "the value names (None and 1: the legacy default stream, 2: the per-thread "
                  "default stream, -1 and handle: a stream of their own; at handle their "
                  "from_dlpack picks the value).")
        text = "\n".join(rows) + "\n\n" + legend
        if details:
            text += "\n\n" + "\n".join(details)
        return text

    def to_json(self, allow_race: bool = False, require_gpu: bool = False) -> Dict[str, Any]:
        counts = self.counts()
        controls = self._judged("control")
        reference = self._judged("reference")
        return {
            "tool": "dlsync.audit",
            "format": FORMAT,
            "device": self.device,
            "world": self.world,
            "frameworks": self.frameworks,
            "runs": self.runs,
            "window_s": self.window,
            "cells": self.cell_keys,
            "pairs": [pair.to_json() for pair in self.pairs],
            "summary": dict(counts, controls={"judged": controls[0], "raced": controls[1]},
                            reference={"judged": reference[0], "ordered": reference[1]},
                            failing=[{"producer": p.producer, "consumer": p.consumer,
                                      "cell": c.key} for p, c in self.failing()],
                            errors_unexpected=[{"producer": p.producer, "consumer": p.consumer,
                                                "cell": c.key} for p, c in self.unexpected_errors()],
                            gpu_pairs=self.gpu_pairs()),
            "exit_status": self.exit_status(allow_race, require_gpu),
        }

