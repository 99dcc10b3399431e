"""What fulcrum.init() needs to join a job, read from what the operator puts in a trainer pod
(operator/controller/job_objects.cc) with explicit keyword overrides.

| setting              | environment                       | default                             |
|----------------------|-----------------------------------|-------------------------------------|
| coordinator          | FULCRUM_COORDINATOR (host:port)   | required                            |
| job                  | FULCRUM_JOB ("namespace/name")    | required                            |
| token_file           | FULCRUM_TOKEN_FILE                | /var/run/fulcrum/token/token        |
| coordinator_ca       | FULCRUM_COORDINATOR_CA            | /var/run/fulcrum/token/ca.crt       |
| coordinator_insecure | FULCRUM_COORDINATOR_INSECURE=true | false: TLS verified against the CA  |
| pod                  | POD_NAME                          | <hostname>-<pid>                    |
| node                 | NODE_NAME                         | <hostname>                          |
| host                 | POD_IP                            | 127.0.0.1                           |
| gpu_product          | FULCRUM_GPU_PRODUCT               | the CUDA device's name, else "cpu"  |
| emulated_slowdown    | FULCRUM_EMULATED_SLOWDOWN         | 1 (none)                            |
| slowdown_file        | FULCRUM_SLOWDOWN_FILE             | none                                |
| device               | FULCRUM_DEVICE (cpu, cuda)        | cuda when torch sees one, else cpu  |
| metrics_port         | FULCRUM_METRICS_PORT              | none: no Prometheus endpoint        |

What the job's spec says of training, for the script to use (`job.spec`), also from the pod:

| spec field        | environment              |
|-------------------|--------------------------|
| training.steps    | FULCRUM_STEPS            |
| training.epochs   | FULCRUM_EPOCHS           |
| dataset seed      | FULCRUM_SEED             |
| checkpoint.path   | FULCRUM_CHECKPOINT_DIR   |
| checkpoint.every  | FULCRUM_CHECKPOINT_EVERY |
| initFrom.path     | FULCRUM_INIT_FROM        |
| output.path       | FULCRUM_OUTPUT_DIR       |
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field, fields
from typing import Mapping

from fulcrum.errors import ConfigurationError, NotUnderFulcrumError

# kTokenMountPath in operator/controller/pod_template.h
TOKEN_MOUNT_PATH = "/var/run/fulcrum/token"

_ENVIRONMENT = {
    "coordinator": "FULCRUM_COORDINATOR",
    "job": "FULCRUM_JOB",
    "token_file": "FULCRUM_TOKEN_FILE",
    "coordinator_ca": "FULCRUM_COORDINATOR_CA",
    "coordinator_insecure": "FULCRUM_COORDINATOR_INSECURE",
    "pod": "POD_NAME",
    "node": "NODE_NAME",
    "host": "POD_IP",
    "gpu_product": "FULCRUM_GPU_PRODUCT",
    "emulated_slowdown": "FULCRUM_EMULATED_SLOWDOWN",
    "slowdown_file": "FULCRUM_SLOWDOWN_FILE",
    "device": "FULCRUM_DEVICE",
    "metrics_port": "FULCRUM_METRICS_PORT",
}

# The job's spec as the operator passes it to a runtime python pod (PythonRuntimeEnv in
# operator/controller/job_objects.cc).
_SPEC = {
    "steps": "FULCRUM_STEPS",
    "epochs": "FULCRUM_EPOCHS",
    "seed": "FULCRUM_SEED",
    "checkpoint_dir": "FULCRUM_CHECKPOINT_DIR",
    "checkpoint_every": "FULCRUM_CHECKPOINT_EVERY",
    "init_from": "FULCRUM_INIT_FROM",
    "output_dir": "FULCRUM_OUTPUT_DIR",
}

NOT_UNDER_FULCRUM = (
    "fulcrum.init(): FULCRUM_COORDINATOR is not set, so this script is not running under Fulcrum "
    "(the operator sets it, with the job's token and CA, in every trainer pod of a "
    "HeteroTrainingJob). To run it outside a cluster, start fulcrum-coordinator and pass "
    "fulcrum.init(coordinator='HOST:PORT', job='NAMESPACE/NAME', token_file=..., "
    "coordinator_ca=... or coordinator_insecure=True), or set FULCRUM_COORDINATOR, FULCRUM_JOB "
    "and FULCRUM_TOKEN_FILE.")


def _parse_bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no", ""):
        return False
    raise ConfigurationError(f"{name}={text!r}: expected true or false")


def _integer(name: str, text: str | None, least: int) -> int | None:
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ConfigurationError(f"{name}={text!r}: expected a whole number") from None
    if value < least:
        raise ConfigurationError(f"{name}={value}: expected a number >= {least}")
    return value


@dataclass
class JobSpec:
    """What the job's spec says of training (None: not set). `steps` and `epochs` are the
    default length of job.data_loader(); the paths are the job's storage, for the script's own
    checkpoints, starting weights and trained model."""
    steps: int | None = None
    epochs: int | None = None
    seed: int | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int | None = None
    init_from: str | None = None
    output_dir: str | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> "JobSpec":
        environ = os.environ if environ is None else environ
        text = {name: environ.get(variable) or None for name, variable in _SPEC.items()}
        steps = _integer("$FULCRUM_STEPS", text["steps"], 0)
        return cls(steps=steps or None,  # 0: the job sets no step count
                   epochs=_integer("$FULCRUM_EPOCHS", text["epochs"], 1),
                   seed=_integer("$FULCRUM_SEED", text["seed"], 0),
                   checkpoint_dir=text["checkpoint_dir"],
                   checkpoint_every=_integer("$FULCRUM_CHECKPOINT_EVERY",
                                             text["checkpoint_every"], 1),
                   init_from=text["init_from"],
                   output_dir=text["output_dir"])


@dataclass
class PodEnvironment:
    coordinator: str
    job: str
    token: str = field(repr=False)
    root_certificates: bytes | None = field(repr=False)  # None: plaintext
    pod: str
    node: str
    host: str
    gpu_product: str | None  # None: ask the device
    emulated_slowdown: float
    slowdown_file: str | None
    device: str | None = None  # None: cuda when torch sees one
    metrics_port: int | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None, **overrides) -> "PodEnvironment":
        """The settings: each keyword given (not None) wins over its environment variable."""
        environ = os.environ if environ is None else environ
        unknown = set(overrides) - set(_ENVIRONMENT)
        if unknown:
            raise TypeError(f"fulcrum.init() got unexpected keyword(s) {sorted(unknown)}; "
                            f"known: {sorted(_ENVIRONMENT)}")

        def setting(name: str):
            value = overrides.get(name)
            if value is not None:
                return value, f"fulcrum.init({name}=...)"
            variable = _ENVIRONMENT[name]
            return environ.get(variable) or None, f"${variable}"

        coordinator, _ = setting("coordinator")
        if not coordinator:
            raise NotUnderFulcrumError(NOT_UNDER_FULCRUM)
        coordinator = str(coordinator)
        host_part, _, port = coordinator.rpartition(":")
        if not host_part or not port.isdigit():
            raise ConfigurationError(
                f"coordinator {coordinator!r} ({setting('coordinator')[1]}): expected HOST:PORT")
        job, _ = setting("job")
        if not job:
            raise ConfigurationError(
                "the job's name is not set: FULCRUM_JOB (\"namespace/name\", as the coordinator "
                "knows the job) or fulcrum.init(job=...)")

        token_file, token_source = setting("token_file")
        token_file = str(token_file or f"{TOKEN_MOUNT_PATH}/token")
        try:
            with open(token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as error:
            raise ConfigurationError(
                f"cannot read the job token from {token_file} ({token_source}): "
                f"{error.strerror}. The operator mounts it from the job's token Secret; outside "
                "a cluster pass token_file= or set FULCRUM_TOKEN_FILE") from None
        if not token:
            raise ConfigurationError(f"the token file {token_file} ({token_source}) is empty")

        insecure_value, insecure_source = setting("coordinator_insecure")
        insecure = (insecure_value if isinstance(insecure_value, bool)
                    else _parse_bool(insecure_source, str(insecure_value or "")))
        root_certificates = None
        if not insecure:
            ca_file, ca_source = setting("coordinator_ca")
            ca_file = str(ca_file or f"{TOKEN_MOUNT_PATH}/ca.crt")
            try:
                with open(ca_file, "rb") as handle:
                    root_certificates = handle.read()
            except OSError as error:
                raise ConfigurationError(
                    f"cannot read the coordinator's CA from {ca_file} ({ca_source}): "
                    f"{error.strerror}. TLS needs it; a plaintext coordinator (local use only) "
                    "needs coordinator_insecure=True or FULCRUM_COORDINATOR_INSECURE=true"
                ) from None
            if b"-----BEGIN CERTIFICATE-----" not in root_certificates:
                raise ConfigurationError(f"no PEM certificate in {ca_file} ({ca_source})")

        hostname = socket.gethostname() or "localhost"
        pod, _ = setting("pod")
        node, _ = setting("node")
        host, _ = setting("host")
        gpu_product, _ = setting("gpu_product")
        slowdown_value, slowdown_source = setting("emulated_slowdown")
        try:
            slowdown = float(slowdown_value) if slowdown_value is not None else 1.0
        except ValueError:
            raise ConfigurationError(
                f"{slowdown_source}={slowdown_value!r}: expected a number >= 1") from None
        if not 1.0 <= slowdown <= 100.0:
            raise ConfigurationError(
                f"{slowdown_source}={slowdown}: expected a number in [1, 100]")
        slowdown_file, _ = setting("slowdown_file")
        device, device_source = setting("device")
        if device is not None and str(device).split(":")[0] not in ("cpu", "cuda"):
            raise ConfigurationError(f"{device_source}={device!r}: expected cpu or cuda")
        port_value, port_source = setting("metrics_port")
        metrics_port = _integer(port_source, None if port_value is None else str(port_value), 0)
        if metrics_port is not None and metrics_port > 65535:
            raise ConfigurationError(f"{port_source}={metrics_port}: expected a port <= 65535")
        return cls(coordinator=coordinator, job=str(job), token=token,
                   root_certificates=root_certificates,
                   pod=str(pod or f"{hostname}-{os.getpid()}"), node=str(node or hostname),
                   host=str(host or "127.0.0.1"), gpu_product=gpu_product,
                   emulated_slowdown=slowdown, slowdown_file=slowdown_file,
                   device=str(device) if device is not None else None,
                   metrics_port=metrics_port)

    @staticmethod
    def settings() -> list[str]:
        return [f.name for f in fields(PodEnvironment)]
