"""Progress prints a line every 5% (or every few seconds) with samples/s, and the last one at
100%, so a long pack is visibly alive without flooding the terminal."""

from __future__ import annotations

import io

from fulcrum.pack.progress import Progress


def test_a_line_every_five_percent_and_at_the_end():
    stream = io.StringIO()
    progress = Progress(stream=stream, every_seconds=3600)
    for done in range(1, 1001):
        progress(done, 1001)
    progress(1001, 1001)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 21
    assert lines[0].startswith("fulcrum-pack: 50/1001 samples (5%), ")
    assert lines[-1].startswith("fulcrum-pack: 1001/1001 samples (100%), ")
    assert all(line.endswith(" samples/s") for line in lines)


def test_a_slow_pack_reports_by_time():
    stream = io.StringIO()
    progress = Progress(stream=stream, every_seconds=0)
    for done in range(1, 4):
        progress(done, 1000)
    assert len(stream.getvalue().splitlines()) == 3
