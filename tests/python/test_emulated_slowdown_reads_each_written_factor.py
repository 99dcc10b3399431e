"""The emulated slowdown file (EMULATION, tests and demos only) is re-read when it changes. A
writer that truncates and then writes can be caught in between, and on a coarse file clock the
two share one mtime: the empty read must not count as having seen that version."""

from __future__ import annotations

import os

import pytest

from fulcrum.emulated_slowdown import EmulatedSlowdown


def test_a_factor_written_after_a_read_of_the_truncated_file_in_the_same_mtime_is_applied(tmp_path):
    path = tmp_path / "slowdown"
    path.write_text("2\n")
    slowdown = EmulatedSlowdown(file=str(path))
    assert slowdown.current() == 2.0
    tick = os.stat(path).st_mtime_ns + 1_000_000
    path.write_text("")  # the writer's truncate, read before its write lands
    os.utime(path, ns=(tick, tick))
    assert slowdown.current() == 2.0
    path.write_text("12\n")  # the write, within the same tick of a coarse clock
    os.utime(path, ns=(tick, tick))
    assert slowdown.current() == 12.0


def test_a_file_that_is_not_a_factor_is_ignored_once_until_it_changes(tmp_path, caplog):
    path = tmp_path / "slowdown"
    path.write_text("fast\n")
    slowdown = EmulatedSlowdown(factor=3.0, file=str(path))
    assert slowdown.current() == 3.0
    assert slowdown.current() == 3.0
    assert sum("ignoring" in record.getMessage() for record in caplog.records) == 1
    path.write_text("4\n")
    os.utime(path, ns=(os.stat(path).st_mtime_ns + 1_000_000,) * 2)
    assert slowdown.current() == 4.0


def test_it_sleeps_factor_minus_one_times_the_cpu_time_the_compute_used():
    # As fulcrum-trainer's EmulatedSlowdown::SleepSeconds: 30 ms of wall time, 20 ms of it
    # computing; the 10 ms spent waiting for a shared core is not multiplied.
    assert EmulatedSlowdown.sleep_seconds(4.0, 0.030, 0.020) == pytest.approx(3.0 * 0.020)
    # More CPU than wall time (extra threads): never more than (factor - 1) x wall.
    assert EmulatedSlowdown.sleep_seconds(2.0, 0.010, 0.035) == pytest.approx(0.010)
    assert EmulatedSlowdown.sleep_seconds(1.0, 0.030, 0.030) == 0.0
    assert EmulatedSlowdown.sleep_seconds(3.0, 0.030, -1.0) == 0.0
