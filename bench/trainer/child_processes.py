"""Waiting for a benchmark's ranks, for the benchmarks in this folder."""
import json
import subprocess
import sys
import time


def wait_for_ranks(ranks, timeout, workdir, name, results=None, exit_grace=15.0):
    """Waits up to `timeout` seconds in all for every process in `ranks`; exits with a message
    naming `name` and the logs in `workdir` when one is still running then or exited non-zero.
    Whatever happens, none is left running.

    `results`, when given, are the ranks' result files: a rank that wrote a complete one and has
    not exited `exit_grace` seconds later is stopped and counts as done. With Debian's torch
    1.13 a Gloo rank once sat in a futex for 12 minutes after writing its result, and the
    benchmark around it waited for the timeout and then failed."""
    deadline = time.time() + timeout
    written_at = {}
    stopped = set()
    try:
        while any(rank.poll() is None for rank in ranks):
            if time.time() > deadline:
                raise SystemExit(f"{name}: timed out after {timeout} s; logs in {workdir}")
            for index, rank in enumerate(ranks):
                if results is None or rank.poll() is not None:
                    continue
                if index not in written_at and result_complete(results[index]):
                    written_at[index] = time.time()
                if index in written_at and time.time() - written_at[index] > exit_grace:
                    print(f"{name}: rank {index} wrote its result but had not exited "
                          f"{exit_grace:g} s later; stopped", file=sys.stderr)
                    rank.kill()
                    rank.wait()
                    stopped.add(index)
            time.sleep(0.2)
    finally:
        kill_all(ranks)
    if any(rank.returncode != 0 for index, rank in enumerate(ranks) if index not in stopped):
        raise SystemExit(f"{name}: a rank failed; logs in {workdir}")


def result_complete(path):
    """Whether `path` holds a whole JSON document (its writer has closed it)."""
    try:
        with open(path) as handle:
            json.load(handle)
        return True
    except (OSError, ValueError):
        return False


def kill_all(processes):
    """Kills and reaps every process in `processes` still running."""
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()
