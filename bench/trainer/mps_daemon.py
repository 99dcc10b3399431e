"""NVIDIA's MPS control daemon for the GPU benchmarks: real heterogeneity on one GPU, each client
process limited to its own share of the multiprocessors by CUDA_MPS_ACTIVE_THREAD_PERCENTAGE."""
import contextlib
import os
import subprocess
import tempfile

PERCENTAGE_VARIABLE = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"


def _control(environment, command=None):
    """nvidia-cuda-mps-control: -d starts the daemon, a command on stdin talks to it."""
    arguments = ["nvidia-cuda-mps-control"] + (["-d"] if command is None else [])
    return subprocess.run(arguments, input=command, text=True, env=environment,
                          capture_output=True, timeout=60)


@contextlib.contextmanager
def mps_daemon(log_directory):
    """Starts the daemon with its pipes in a folder of its own (apart from logs, which may be
    archived: sockets do not archive) and yields (environment for its clients, a report of the
    start); quits it on the way out."""
    pipes = tempfile.mkdtemp(prefix="fulcrum-mps-")
    environment = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipes,
                       CUDA_MPS_LOG_DIRECTORY=log_directory)
    os.makedirs(log_directory, exist_ok=True)
    started = _control(environment)
    try:
        yield environment, {"exit_code": started.returncode,
                            "output": (started.stdout + started.stderr)[-500:]}
    finally:
        _control(environment, "quit\n")


def gpu_name():
    """The GPU's name from nvidia-smi: the caller makes no CUDA context (one outside MPS would
    share the GPU with the daemon's clients)."""
    return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                          capture_output=True, text=True, check=False).stdout.strip()
