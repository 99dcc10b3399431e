"""Progress lines on stderr: a pack of a large dataset runs for minutes, and silence looks
like a hang. A line every 5% or every 5 seconds, whichever comes first, with the rate since
the previous line (samples/s), which shows a stall at once where an average would not."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


class Progress:
    """Called with (samples done, total) after each write; prints when there is news."""

    def __init__(self, stream: Optional[TextIO] = None, every_seconds: float = 5.0,
                 every_fraction: float = 0.05) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every_seconds = every_seconds
        self.every_fraction = every_fraction
        self._last: Optional[tuple[float, int]] = None  # (time, done) at the last line
        self._next_count = 0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        step = max(1, int(total * self.every_fraction))
        if self._last is None:  # the first write starts the clock
            self._last, self._next_count = (now, 0), step
        last_time, last_done = self._last
        if done < total and done < self._next_count and now - last_time < self.every_seconds:
            return
        rate = (done - last_done) / max(now - last_time, 1e-9)
        self._last = (now, done)
        self._next_count = (done // step + 1) * step
        print(f"fulcrum-pack: {done}/{total} samples ({100.0 * done / total:.0f}%), "
              f"{rate:.0f} samples/s", file=self.stream, flush=True)
