"""Emulated heterogeneity for tests, demos and benchmarks only, as in fulcrum-trainer
(trainer_image/trainer/device/emulated_slowdown.cc): after a step's compute the process sleeps
(factor - 1) x the compute's own CPU time (capped by its wall time), before the last gradient
bucket goes out, as a slower GPU would finish backward later. The factor comes from
$FULCRUM_EMULATED_SLOWDOWN and, while running, from the file $FULCRUM_SLOWDOWN_FILE (which
fulcrum-local-node rewrites from a node's emulated-slowdown label) whenever it changes.
Every change is logged and labelled as EMULATION: no GPU is slowed.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("fulcrum")


class EmulatedSlowdown:
    def __init__(self, factor: float = 1.0, file: str | None = None):
        if not factor >= 1.0:
            raise ValueError(f"emulated slowdown must be >= 1, got {factor}")
        self.factor = float(factor)
        self.file = file or None
        self._seen_mtime: int | None = None
        if self.factor != 1.0 or self.file:
            log.info("EMULATION: compute is slowed down artificially (tests/demos only): "
                     "factor %s, file %s", self.factor, self.file)

    @property
    def enabled(self) -> bool:
        return self.factor != 1.0 or self.file is not None

    def current(self) -> float:
        """The factor for this step: the file's number when the file changed, else the last."""
        if not self.file:
            return self.factor
        try:
            modified = os.stat(self.file).st_mtime_ns
        except OSError:
            return self.factor
        if modified == self._seen_mtime:
            return self.factor
        try:
            with open(self.file, encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            return self.factor
        if not text.strip():
            # A writer that truncates and then writes (not every writer renames into place) can
            # be read between the two, and both may carry one mtime on a coarse clock: marking
            # the empty file seen would lose the number written a moment later for good.
            return self.factor
        self._seen_mtime = modified
        try:
            factor = float(text.split()[0])
        except ValueError:
            factor = float("nan")
        if not 1.0 <= factor <= 100.0:
            log.warning("EMULATION: ignoring %s: expected a number in [1, 100]", self.file)
            return self.factor
        if factor != self.factor:
            log.info("EMULATION: slowdown factor changed from %s to %s", self.factor, factor)
        self.factor = factor
        return self.factor

    @staticmethod
    def sleep_seconds(factor: float, wall_seconds: float, cpu_seconds: float) -> float:
        if not factor > 1.0:
            return 0.0
        return (factor - 1.0) * max(0.0, min(wall_seconds, cpu_seconds))
