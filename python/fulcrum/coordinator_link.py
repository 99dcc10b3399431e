"""This trainer's end of the coordinator's Session stream (proto/fulcrum/v1/coordinator.proto),
with fulcrum-trainer's behaviour (trainer_image/trainer/membership/coordinator_link.cc): a thread
keeps the stream open and reconnects with jittered back-off (training goes on meanwhile on the
last assignment), a heartbeat goes out after every 250 ms in which nothing else was sent, and
received Assignments and Controls wait in a mailbox for the training loop. UNAUTHENTICATED,
INVALID_ARGUMENT and PERMISSION_DENIED are final; every other status is retried.
"""

from __future__ import annotations

import collections
import logging
import queue
import random
import threading
import time
from typing import Iterator, Optional

import grpc

from fulcrum.stubs import load

pb = load()
log = logging.getLogger("fulcrum")

_FIRST_BACKOFF = 0.1
_MAX_BACKOFF = 2.0
_MAX_MESSAGE_BYTES = 64 * 1024  # the protocol's limit
_MAX_QUEUED = 1024              # reports are best effort: the oldest go first
_PERMANENT = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INVALID_ARGUMENT,
              grpc.StatusCode.PERMISSION_DENIED)
_END = object()  # ends a stream's request iterator

_SERVICE = pb.DESCRIPTOR.services_by_name["Coordinator"]
SESSION_METHOD = f"/{_SERVICE.full_name}/{_SERVICE.methods_by_name['Session'].name}"


def _retry_reason(code: grpc.StatusCode) -> str:
    if code == grpc.StatusCode.NOT_FOUND:
        return ("the coordinator does not know this job yet (the operator registers it once its "
                "caches sync); retrying")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return "the coordinator is overloaded; retrying"
    return "coordinator stream closed; reconnecting"


def _jittered(backoff: float) -> float:
    # 3/4..5/4 of it, so the trainers of a job that lost the coordinator at once come back spread.
    return backoff * random.uniform(0.75, 1.25)


class _Outbox:
    """The messages of one stream, in order: the Hello (and a pending Rejoin) first."""

    def __init__(self, first: list):
        self._queue: "queue.Queue" = queue.Queue()
        for message in first:
            self._queue.put(message)
        self.taken = threading.Condition()
        self.pending = len(first)

    def put(self, message) -> None:
        with self.taken:
            if self.pending >= _MAX_QUEUED:
                return  # dropped: the writer is stuck; the coordinator's timeouts will say so
            self.pending += 1
        self._queue.put(message)

    def close(self) -> None:
        self._queue.put(_END)

    def __iter__(self) -> Iterator:
        while True:
            message = self._queue.get()
            if message is _END:
                return
            with self.taken:  # handed to gRPC, which writes it before it asks for the next
                self.pending -= 1
                self.taken.notify_all()
            yield message


class CoordinatorLink:
    def __init__(self, address: str, hello, root_certificates: Optional[bytes],
                 heartbeat_period: float = 0.25, keepalive_seconds: float = 5.0):
        self._hello = hello
        self._heartbeat_period = heartbeat_period
        options = [("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
                   ("grpc.keepalive_time_ms", int(keepalive_seconds * 1000)),
                   ("grpc.keepalive_timeout_ms", int(keepalive_seconds * 1000)),
                   ("grpc.keepalive_permit_without_calls", 1),
                   ("grpc.http2.max_pings_without_data", 0)]
        if root_certificates is None:
            self._channel = grpc.insecure_channel(address, options=options)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(address, credentials, options=options)
        self._session = self._channel.stream_stream(
            SESSION_METHOD, request_serializer=pb.TrainerMessage.SerializeToString,
            response_deserializer=pb.CoordinatorMessage.FromString)
        self._changed = threading.Condition()  # guards everything below
        self._assignments: dict[int, list] = {}  # by generation, in arrival order
        self._controls: collections.deque = collections.deque()
        self._fatal: Optional[tuple[grpc.StatusCode, str]] = None
        self._generation = 0
        self._step = 0
        self._pending_rejoin = None
        self._outbox: Optional[_Outbox] = None
        self._call = None
        self._last_queued = time.monotonic()
        self._stopped = False
        self._threads = [threading.Thread(target=self._session_loop, name="fulcrum-session",
                                          daemon=True),
                         threading.Thread(target=self._heartbeat_loop, name="fulcrum-heartbeat",
                                          daemon=True)]
        for thread in self._threads:
            thread.start()

    # -- the stream -----------------------------------------------------------------------------
    def _session_loop(self) -> None:
        backoff = _FIRST_BACKOFF
        while True:
            with self._changed:
                if self._stopped:
                    return
                hello = pb.TrainerMessage()
                hello.hello.CopyFrom(self._hello)
                hello.hello.step = self._step
                hello.hello.generation = self._generation
                first = [hello]
                if self._pending_rejoin is not None:
                    rejoin = pb.TrainerMessage()
                    rejoin.rejoin.CopyFrom(self._pending_rejoin)
                    first.append(rejoin)
                outbox = _Outbox(first)
                call = self._session(iter(outbox))
                self._outbox, self._call = outbox, call
            code, details = grpc.StatusCode.OK, "the coordinator closed the stream"
            try:
                for message in call:
                    backoff = _FIRST_BACKOFF
                    self._receive(message)
            except grpc.RpcError as error:
                code, details = error.code(), error.details()
            with self._changed:
                self._outbox, self._call = None, None
                stopped = self._stopped
            outbox.close()
            if stopped:
                return
            if code in _PERMANENT:
                log.error("the coordinator refused this trainer: %s: %s", code.name, details)
                with self._changed:
                    self._fatal = (code, details)
                    self._changed.notify_all()
                return
            wait = _jittered(backoff)
            log.warning("%s (%s: %s; back-off %.0f ms)", _retry_reason(code), code.name, details,
                        wait * 1000)
            with self._changed:
                self._changed.wait_for(lambda: self._stopped, timeout=wait)
            backoff = min(backoff * 2, _MAX_BACKOFF)

    def _heartbeat_loop(self) -> None:
        # Any message shows the coordinator this trainer is alive: a heartbeat only fills silence.
        while True:
            with self._changed:
                due = self._last_queued + self._heartbeat_period
                self._changed.wait_for(lambda: self._stopped,
                                       timeout=max(0.0, due - time.monotonic()))
                if self._stopped:
                    return
                if time.monotonic() < self._last_queued + self._heartbeat_period:
                    continue
                message = pb.TrainerMessage()
                message.heartbeat.generation = self._generation
            self._send(message)

    def _receive(self, message) -> None:
        with self._changed:
            if message.HasField("assignment"):
                assignment = message.assignment
                self._assignments.setdefault(assignment.generation, []).append(assignment)
                if (self._pending_rejoin is not None
                        and assignment.generation > self._pending_rejoin.generation):
                    self._pending_rejoin = None
                while len(self._assignments) > 2:  # older generations can no longer start
                    del self._assignments[min(self._assignments)]
                updates = self._assignments[assignment.generation]
                if len(updates) > 64:
                    del updates[1:33]
            elif message.HasField("control"):
                self._controls.append(message.control)
            self._changed.notify_all()

    def _send(self, message) -> None:
        with self._changed:
            self._last_queued = time.monotonic()
            outbox = self._outbox
        if outbox is not None:
            outbox.put(message)  # dropped while disconnected, as fulcrum-trainer does

    # -- what the training loop uses -------------------------------------------------------------
    def wait_for_generation(self, after: int, timeout: float):
        """The first Assignment of a generation newer than `after`, if one arrives in time."""
        with self._changed:
            def newer():
                return (self._fatal is not None or bool(self._controls)
                        or (self._assignments and max(self._assignments) > after))
            self._changed.wait_for(newer, timeout=timeout)
            if not self._assignments or max(self._assignments) <= after:
                return None
            return self._assignments[max(self._assignments)][0]

    def has_newer_generation(self, generation: int) -> bool:
        with self._changed:
            return bool(self._assignments) and max(self._assignments) > generation

    def plan_at(self, base, step: int):
        """The latest update of base's generation with apply_at_step <= step, or base."""
        with self._changed:
            best = base
            for update in self._assignments.get(base.generation, []):
                if best.apply_at_step <= update.apply_at_step <= step:
                    best = update
            return best

    def take_control(self):
        with self._changed:
            return self._controls.popleft() if self._controls else None

    def fatal(self) -> Optional[tuple[grpc.StatusCode, str]]:
        with self._changed:
            return self._fatal

    def report(self, report) -> None:
        message = pb.TrainerMessage()
        message.step_report.CopyFrom(report)
        self._send(message)

    def request_rejoin(self, generation: int, reason: str) -> bool:
        message = pb.TrainerMessage()
        message.rejoin.generation = generation
        message.rejoin.reason = reason[:1000]
        with self._changed:
            self._pending_rejoin = message.rejoin
        self._send(message)
        return True

    def set_progress(self, generation: int, step: int) -> None:
        with self._changed:
            self._generation, self._step = generation, step

    def flush(self, timeout: float) -> None:
        """Waits up to `timeout` for what was queued to be handed to gRPC."""
        with self._changed:
            outbox = self._outbox
        if outbox is None:
            return
        with outbox.taken:
            outbox.taken.wait_for(lambda: outbox.pending <= 0, timeout=timeout)

    def close(self) -> None:
        with self._changed:
            self._stopped = True
            call = self._call
            self._changed.notify_all()
        if call is not None:
            call.cancel()
        for thread in self._threads:
            thread.join(timeout=5)
        self._channel.close()


class StaticMembership:
    """A fixed group (tests, benchmarks, a run without a coordinator): one generation with the
    given rank, world and batches. Nothing is reported; a failure cannot be recovered."""

    def __init__(self, assignment):
        self._assignment = assignment

    def wait_for_generation(self, after: int, timeout: float):
        return None if after >= self._assignment.generation else self._assignment

    def has_newer_generation(self, generation: int) -> bool:
        return False

    def plan_at(self, base, step: int):
        return base

    def take_control(self):
        return None

    def fatal(self):
        return None

    def report(self, report) -> None:
        pass

    def request_rejoin(self, generation: int, reason: str) -> bool:
        return False

    def set_progress(self, generation: int, step: int) -> None:
        pass

    def flush(self, timeout: float) -> None:
        pass

    def close(self) -> None:
        pass
