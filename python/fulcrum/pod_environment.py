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
        return cls(coordinator=coordinator, job=str(job), token=token,
                   root_certificates=root_certificates,
                   pod=str(pod or f"{hostname}-{os.getpid()}"), node=str(node or hostname),
                   host=str(host or "127.0.0.1"), gpu_product=gpu_product,
                   emulated_slowdown=slowdown, slowdown_file=slowdown_file)

    @staticmethod
    def settings() -> list[str]:
        return [f.name for f in fields(PodEnvironment)]
