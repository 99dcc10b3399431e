"""Waiting for a benchmark's ranks, for the benchmarks in this folder."""
import subprocess
import time


def wait_for_ranks(ranks, timeout, workdir, name):
    """Waits up to `timeout` seconds in all for every process in `ranks`; exits with a message
    naming `name` and the logs in `workdir` when one is still running then or exited non-zero.
    Whatever happens, none is left running."""
    try:
        deadline = time.time() + timeout
        for rank in ranks:
            rank.wait(timeout=max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{name}: timed out after {timeout} s; logs in {workdir}") from None
    finally:
        kill_all(ranks)
    if any(rank.returncode != 0 for rank in ranks):
        raise SystemExit(f"{name}: a rank failed; logs in {workdir}")


def kill_all(processes):
    """Kills and reaps every process in `processes` still running."""
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()
