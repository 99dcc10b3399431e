"""A user's own PyTorch training loop as a member of a Fulcrum job.

    job = fulcrum.init()                       # joins the coordinator, forms the process group
    state = fulcrum.State(model=net, optimizer=optimizer)

    @job.elastic(state)                        # re-forms in place when members leave or join
    def train(state):
        model = job.distributed(state.model)   # stock DDP with Fulcrum's gradient comm hook
        for inputs, labels in job.data_loader(dataset, epochs=10, num_workers=4):
            loss = loss_fn(model(inputs), labels)  # the mean over this rank's local batch
            job.backward(loss)                 # instead of loss.backward()
            state.optimizer.step()
            state.optimizer.zero_grad()

    train()

What it does, with fulcrum-trainer's meaning (trainer_image/trainer/loop/training_loop.cc):
- Each rank gets its own local batch b_i from the coordinator's plan; the data loader yields this
  rank's share of each global step, cut from one per-epoch permutation by prefix sums of the plan
  (sample_order.py), so every sample of an epoch is trained once whatever the plan did.
- Weighted aggregation: the comm hook scales each gradient bucket by b_i / B before DDP's
  all-reduce (sum), so the result is the mean gradient of the global batch B = sum b_i, exactly
  that of one process on the global batch.
- The control vector (control.py: the batch sum, the loss, leave and checkpoint flags, rank 0's
  plan for the next step, the live-edited recipe) rides at the end of the last gradient bucket,
  so all ranks switch plans at the same step without a second collective.
- After every step a StepReport (compute, data wait, peak memory, loss, step end on the monotonic
  clock) goes to the coordinator, whose balancer moves samples towards the faster ranks.
- Membership changes end a generation in band after a step (or a failed all-reduce ends it
  uncommitted); job.elastic joins the next one, the rank with the highest step sends its State
  to all, and the training function runs again from the agreed step. SIGTERM, STOP and DRAIN
  make every rank leave after the same step; the loader then ends.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import math
import os
import resource
import signal
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

from fulcrum import control as control_layout
from fulcrum.coordinator_link import CoordinatorLink, StaticMembership, pb
from fulcrum.emulated_slowdown import EmulatedSlowdown
from fulcrum.errors import (CollectiveFailed, CoordinatorRefusedError, FulcrumError,
                            MembershipChanged, UsageError)
from fulcrum.learning_rate import scale_learning_rate
from fulcrum.metrics import TrainerMetrics
from fulcrum.pod_environment import JobSpec, PodEnvironment
from fulcrum.sample_order import SampleOrder, shard_for_rank
from fulcrum import state_checkpoint
from fulcrum.state import State

log = logging.getLogger("fulcrum")

_WAIT_SLICE = 0.2      # seconds between looks at the mailbox while waiting for an Assignment
_WAIT_LOG_EVERY = 10.0  # seconds between "still waiting" log lines
# DataLoader arguments that decide which samples a batch holds: Fulcrum's plan decides those.
_REFUSED_LOADER_ARGUMENTS = ("batch_size", "sampler", "batch_sampler", "drop_last")


def _product_label(name: str) -> str:
    # GPU Feature Discovery labels spell the product with dashes where CUDA has spaces.
    return name.replace(" ", "-")


def _peak_resident_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _is_collective_failure(error: BaseException) -> bool:
    """Whether a RuntimeError from torch comes from a collective whose peer died or hung (Gloo
    transport errors, timeouts, NCCL errors) rather than from the model."""
    text = str(error)
    return any(mark in text for mark in ("gloo/transport", "Connection closed by peer",
                                         "Connection reset by peer", "Timed out waiting",
                                         "NCCL error", "ncclRemoteError", "ncclSystemError",
                                         "Broken pipe"))


class _Stopped(Exception):
    """Asked to stop (STOP, DRAIN, SIGTERM) while waiting for the next generation."""


@dataclass
class _Step:
    """What one optimizer step knows about itself, from the batch request to the step's end."""
    index: int
    generation: int
    batches: list[int]         # the plan the step ran under
    positions: range           # this rank's positions (clipped at the last epoch's end)
    global_batch: int          # samples of all ranks (clipped likewise)
    started: float             # monotonic: the loop asked for the batch
    data_wait: float = 0.0
    compute_start: float = 0.0
    cpu_start: float = 0.0
    cuda_start: Any = None
    loss: Optional[float] = None   # the local mean loss job.backward saw
    control: Optional[list[float]] = None
    compute_end: Optional[float] = None
    compute_seconds: float = 0.0
    emulated_seconds: float = 0.0
    summed: Optional[torch.Tensor] = None  # the control vector after the all-reduce
    indices: Optional[list[int]] = None    # this rank's samples, for the sample log
    backward_done: Optional[float] = None
    reducing: bool = False  # a gradient bucket's all-reduce went out
    agreed: Optional[control_layout.Agreed] = None
    # The gradient noise scale's inputs, summed over the buckets as they pass the comm hook
    # (tensors on the bucket's device: read once, at the step's end).
    local_squares: Any = 0.0   # |ĝ_i|² of this rank's mean gradient, before the all-reduce
    global_squares: Any = 0.0  # |ĝ|² of the aggregated mean gradient, after it

    @property
    def local_batch(self) -> int:
        return len(self.positions)


@dataclass
class StaticGroup:
    """A group without a coordinator (tests, benchmarks): every process names its rank, the
    same batches and the same rendezvous HOST:PORT, where rank 0 serves the c10d TCPStore."""
    rank: int
    batches: Sequence[int]
    rendezvous: str


class Job:
    """This process's membership in a Fulcrum job; made by fulcrum.init()."""

    def __init__(self, membership, settings: Optional[PodEnvironment], device: torch.device,
                 backend: str, store_server, collective_timeout: float,
                 slowdown: EmulatedSlowdown, sample_log: Optional[str]):
        self._membership = membership
        self._settings = settings
        self.device = device
        self.backend = backend
        self._store_server = store_server  # kept alive: rank 0's store is the rendezvous
        self._collective_timeout = collective_timeout
        self._slowdown = slowdown
        self._sample_log = open(sample_log, "a", encoding="utf-8") if sample_log else None
        # What the job's spec says of training (steps or epochs, seed, storage paths).
        self.spec = JobSpec.read()
        # On the pod's own address, as fulcrum-trainer's --host: fulcrum-local-node's pods
        # share one network namespace, each with its own loopback address.
        self._metrics = (TrainerMetrics(settings.job, settings.pod, settings.metrics_port,
                                        settings.host)
                         if settings is not None else TrainerMetrics("", "", None, ""))
        self._assignment = None   # the generation's first Assignment
        self._batches: list[int] = []
        self.generation = 0
        self.rank = 0
        self.world_size = 0
        self.step = 0      # optimizer steps completed, agreed by every rank
        self.cursor = 0    # sample positions consumed, agreed by every rank
        # Samples weighted by their step's sample efficiency, agreed by every rank: what a
        # loader's epochs= counts (fulcrum-trainer's Progress::equivalent_samples).
        self.equivalent_samples = 0.0
        self.learning_rate: Optional[float] = None  # the job's live-edited rate, if any
        self.total_steps: Optional[int] = None      # the job's live-edited steps, if any
        # What a sample at the running global batch is worth against one at the job's base batch
        # (Assignment.sample_efficiency; 1 for a fixed batch): fulcrum-trainer counts an epoch
        # job's length in these; a script may too (docs/adaptive-batch.md).
        self.sample_efficiency = 1.0
        self.last_loss = math.nan  # the global batch's loss of the last job.backward
        self.stop_requested = False
        self.drain_requested = False
        self.checkpoint_requested = False  # a checkpoint was agreed after the last step
        self.terminated = False  # SIGTERM: leave in band after the current step
        self._state: Optional[State] = None
        self._synchronised_generation = 0  # the generation whose state every rank holds
        self._resume_checked = False  # the job's checkpoint was looked for (first sync)
        self._last_checkpoint_step = -1
        self._checkpoint_asked = False
        self._step: Optional[_Step] = None
        # A weak reference: the model's reducer holds the comm hook, which holds this job. A
        # strong one would make a cycle through C++ that Python's collector cannot see, and the
        # hook would be destroyed only at interpreter exit, where pybind11 aborts the process.
        self._model: Optional[weakref.ref] = None
        self._warned_no_loss = False
        self._lock = threading.Lock()

    # -- membership --------------------------------------------------------------------------
    @property
    def batches(self) -> list[int]:
        """Every rank's local batch under the current plan, by rank."""
        return list(self._batches)

    @property
    def local_batch(self) -> int:
        return self._batches[self.rank]

    @property
    def global_batch(self) -> int:
        return sum(self._batches)

    def _raise_if_fatal(self) -> None:
        fatal = self._membership.fatal()
        if fatal is not None:
            code, details = fatal
            hint = ""
            if code.name == "UNAUTHENTICATED":
                hint = (" The token does not match the job's: check FULCRUM_TOKEN_FILE / "
                        "token_file= (the operator mounts it from the job's token Secret).")
            raise CoordinatorRefusedError(
                f"the coordinator refused this trainer ({code.name}): {details}.{hint}")

    def _handle_controls(self) -> None:
        while True:
            message = self._membership.take_control()
            if message is None:
                return
            action = pb.Control.Action.Name(message.action)
            log.info("control received: %s (%s)", action, message.reason)
            if message.action == pb.Control.CHECKPOINT:
                self._checkpoint_asked = True
            elif message.action == pb.Control.STOP:
                self.stop_requested = True
            elif message.action == pb.Control.DRAIN:
                self.drain_requested = True

    def _wants_to_leave(self) -> bool:
        return (self.stop_requested or self.drain_requested or self.terminated
                or self._membership.has_newer_generation(self.generation))

    @property
    def stopping(self) -> bool:
        """This rank ends its loop: the job asked it to stop or drain, or it got SIGTERM."""
        return self.stop_requested or self.drain_requested or self.terminated

    def _join_next_generation(self) -> None:
        waited_since = time.monotonic()
        last_log = waited_since
        while True:
            self._raise_if_fatal()
            self._handle_controls()
            if self.stopping and self.generation > 0:
                raise _Stopped()
            assignment = self._membership.wait_for_generation(self.generation, _WAIT_SLICE)
            if assignment is not None:
                break
            now = time.monotonic()
            if now - last_log >= _WAIT_LOG_EVERY:
                log.info("waiting %.0f s for the coordinator's assignment (a generation forms "
                         "once the job's minimum workers have joined)", now - waited_since)
                last_log = now
        if len(assignment.batches) != assignment.world_size or not (
                0 <= assignment.rank < assignment.world_size):
            raise FulcrumError(f"malformed assignment for generation {assignment.generation}: "
                               f"rank {assignment.rank}, world {assignment.world_size}, "
                               f"{len(assignment.batches)} batches")
        self._form_group(assignment)

    def _form_group(self, assignment) -> None:
        """The generation's process group at its rendezvous: rank 0's TCPStore under the prefix
        fulcrum/<job>/gen-<generation>/, as fulcrum-trainer forms its Gloo or NCCL group."""
        job_name = self._settings.job if self._settings else "static"
        prefix = f"fulcrum/{job_name}/gen-{assignment.generation}/"
        host, _, port = assignment.rendezvous_address.rpartition(":")
        log.info("joining generation %d as rank %d of %d at %s (%s)", assignment.generation,
                 assignment.rank, assignment.world_size, assignment.rendezvous_address,
                 assignment.reason)
        timeout = datetime.timedelta(seconds=self._collective_timeout)
        if dist.is_initialized():
            dist.destroy_process_group()
        self._assignment = assignment
        self.generation = assignment.generation
        self.rank = assignment.rank
        self.world_size = assignment.world_size
        self._batches = list(assignment.batches)
        self._membership.set_progress(self.generation, self.step)
        try:
            client = dist.TCPStore(host, int(port), is_master=False, wait_for_workers=False,
                                   timeout=timeout)
            store = dist.PrefixStore(prefix, client)
            dist.init_process_group(self.backend, store=store, rank=assignment.rank,
                                    world_size=assignment.world_size, timeout=timeout)
        except RuntimeError as error:
            raise CollectiveFailed(f"cannot form generation {assignment.generation} at "
                                   f"{assignment.rendezvous_address}: {error}") from error
        self._adopt_recipe(assignment.learning_rate, assignment.total_steps,
                           assignment.sample_efficiency or 1.0, exact=True)

    def _ensure_synchronised(self) -> None:
        """Every rank of a generation synchronises once, at the first of job.elastic's start,
        job.distributed() or the loader's first step: the same place on every rank, since they
        run the same script (a newcomer's first generation is the survivors' next)."""
        if self._synchronised_generation != self.generation:
            self._synchronise()

    def _resume_from_checkpoint(self) -> None:
        """At this process's first synchronisation: the job's checkpoint, if it has one, is its
        starting point (the synchronisation then takes the most advanced rank's, so a newcomer
        to a running job still gets the survivors' state)."""
        self._resume_checked = True
        directory = self.spec.checkpoint_dir
        if self._state is None or not directory or self.step > 0:
            return
        saved = state_checkpoint.load(directory)
        if saved is None:
            log.info("no checkpoint in %s yet: starting from step 0", directory)
            return
        self._state.load_state_dict(saved.state)
        self.step, self.cursor = saved.step, saved.cursor
        self.equivalent_samples = saved.equivalent_samples
        log.info("resumed from checkpoint %s/%s at step %d", directory,
                 state_checkpoint.FILE_NAME, self.step)

    def _save_checkpoint(self, why: str) -> None:
        """Rank 0 writes the State with the agreed step and cursor (every rank holds the same)."""
        if self._state is None or not self.spec.checkpoint_dir or self.rank != 0:
            return
        path = state_checkpoint.save(self.spec.checkpoint_dir, self._state.state_dict(),
                                     self.step, self.cursor, self.equivalent_samples)
        self._last_checkpoint_step = self.step
        log.info("checkpoint saved at step %d (%s): %s", self.step, why, path)

    def _synchronise(self) -> None:
        """The most advanced rank's step, cursor and (with a State) model, optimizer, scheduler
        and extras go to every rank, so the step never goes back and a newcomer catches up.
        Once per generation, never per step."""
        if not self._resume_checked:
            self._resume_from_checkpoint()
        try:
            offers = torch.zeros(3 * self.world_size, dtype=torch.float64, device=self._pg_device)
            offers[self.rank] = self.step
            offers[self.world_size + self.rank] = self.cursor
            offers[2 * self.world_size + self.rank] = self.equivalent_samples
            dist.all_reduce(offers)
            values = offers.tolist()
            steps = values[:self.world_size]
            source = steps.index(max(steps))  # ties: the lowest rank
            payload = [self._state.state_dict() if self._state is not None and
                       self.rank == source else None]
            if self._state is not None:
                dist.broadcast_object_list(payload, src=source)
        except RuntimeError as error:
            raise CollectiveFailed(f"generation {self.generation}: synchronising the state "
                                   f"failed: {error}") from error
        self.step = int(steps[source])
        self.cursor = int(values[self.world_size + source])
        self.equivalent_samples = float(values[2 * self.world_size + source])
        if self._state is not None and self.rank != source:
            self._state.load_state_dict(payload[0])
        self._membership.set_progress(self.generation, self.step)
        self._synchronised_generation = self.generation
        log.info("state synchronised in generation %d from rank %d: step %d, cursor %d%s",
                 self.generation, source, self.step, self.cursor,
                 "" if self._state is not None else " (no fulcrum.State: progress only)")

    @property
    def _pg_device(self) -> torch.device:
        return self.device if self.backend == "nccl" else torch.device("cpu")

    def equivalent_samples_left(self, last_position: int) -> float:
        """The equivalent samples still to train before `last_position` (epochs x dataset size);
        under half a sample is none (sums of products round; a fixed B's are whole numbers)."""
        left = last_position - self.equivalent_samples
        return 0.0 if left < 0.5 else left

    def end_position(self, last_position: int) -> int:
        """The cursor at which a loader's epochs end if the sample efficiency stays: its last
        position under a fixed B, later under a larger adaptive B (docs/adaptive-batch.md)."""
        return self.cursor + math.ceil(self.equivalent_samples_left(last_position)
                                       / self.sample_efficiency)

    def _adopt_recipe(self, learning_rate: float, total_steps: int,
                      sample_efficiency: float, exact: bool = False) -> None:
        # Through two float32 slots the rate is exact to about 1e-14 of it: that close is equal.
        changed = (self.learning_rate is None
                   or abs(learning_rate - self.learning_rate) > 1e-12 * learning_rate)
        if learning_rate > 0 and changed:
            log.info("learning rate from the job: %g from step %d", learning_rate, self.step)
            self.learning_rate = learning_rate
        if total_steps > 0 and total_steps != self.total_steps:
            log.info("total steps from the job: %d", total_steps)
            self.total_steps = total_steps
        # 0 is unchanged in band. An Assignment's value (`exact`) is taken as it is, so a
        # generation's members hold bit-identical efficiencies whatever each decoded in band
        # before: the step that ends an epoch job is rounded from it on every rank.
        if math.isfinite(sample_efficiency) and sample_efficiency > 0:
            if abs(sample_efficiency - self.sample_efficiency) > 1e-12 * sample_efficiency:
                log.info("sample efficiency from the job: %g from step %d", sample_efficiency,
                         self.step)
                self.sample_efficiency = sample_efficiency
            elif exact:
                self.sample_efficiency = sample_efficiency

    def apply_learning_rate(self, optimizer: torch.optim.Optimizer,
                            scheduler: Optional[Any] = None) -> Optional[float]:
        """Puts the job's learning rate (a live edit of `training.learningRate`, or the rate an
        adaptive global batch scales) on `optimizer` and `scheduler`; call it before
        `optimizer.step()`. Until the job sets a rate the script's own stays. Parameter groups keep
        their ratios and a scheduler its schedule (fulcrum/learning_rate.py). Returns the job's
        rate, or None."""
        if self.learning_rate is not None:
            scale_learning_rate(optimizer, scheduler, self.learning_rate)
        return self.learning_rate

    # -- the model ---------------------------------------------------------------------------
    def distributed(self, model: torch.nn.Module,
                    **ddp_arguments) -> torch.nn.parallel.DistributedDataParallel:
        """`model` on this job's device inside stock DistributedDataParallel, with the comm hook
        that weights each rank's gradients by its batch and carries the control vector."""
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            raise UsageError("job.distributed(model): the model is already wrapped in "
                             "DistributedDataParallel; pass the plain module")
        for name, parameter in model.named_parameters():
            if parameter.requires_grad and parameter.dtype not in (torch.float32, torch.float64):
                raise UsageError(
                    f"job.distributed(model): parameter {name} is {parameter.dtype}; Fulcrum "
                    "keeps float32 (or float64) parameters so the control values in the last "
                    "gradient bucket stay exact. Keep the weights in float32 and use autocast "
                    "for lower-precision compute")
        self._ensure_synchronised()
        model = model.to(self.device)
        if self.device.type == "cuda":
            ddp_arguments.setdefault("device_ids", [self.device.index or 0])
        try:
            # Its construction checks and broadcasts the parameters: collectives.
            wrapped = torch.nn.parallel.DistributedDataParallel(model, **ddp_arguments)
        except RuntimeError as error:
            if _is_collective_failure(error):
                raise CollectiveFailed(f"generation {self.generation}: DistributedDataParallel "
                                       f"could not form: {error}") from error
            raise
        wrapped.register_comm_hook(state=None, hook=self._comm_hook)
        self._model = weakref.ref(wrapped)
        return wrapped

    def _comm_hook(self, state, bucket):  # no annotations: DDP compares them as objects
        step = self._step
        buffer = bucket.buffer()
        if step is None:
            raise UsageError("gradients were all-reduced outside a step: run forward and "
                             "job.backward(loss) inside `for batch in job.data_loader(...)`")
        weight = step.local_batch / step.global_batch if step.global_batch > 0 else 0.0
        if step.local_batch == 0:
            buffer.zero_()  # an empty share's loss is NaN; its gradient counts for nothing
        else:
            # The bucket holds this rank's mean gradient (of the mean loss over its samples)
            # until the all-reduce overwrites it: its squared norm is the noise scale's input.
            step.local_squares = step.local_squares + _squared_norm(buffer)
            buffer.mul_(weight)
        step.reducing = True
        if not bucket.is_last():
            def reduced_bucket(future):
                reduced = future.value()[0]
                step.global_squares = step.global_squares + _squared_norm(reduced)
                return reduced
            return dist.all_reduce(buffer, async_op=True).get_future().then(reduced_bucket)
        # The last bucket: backward is over. A slower device would send it later; the emulated
        # slowdown sleeps here, before it goes out, as fulcrum-trainer does.
        self._finish_compute(step)
        step.control = self._control_values(step)
        control = torch.tensor(step.control, dtype=buffer.dtype, device=buffer.device)
        joined = torch.cat([buffer, control])
        size = buffer.numel()

        def split(future):
            reduced = future.value()[0]
            step.summed = reduced[size:]
            step.global_squares = step.global_squares + _squared_norm(reduced[:size])
            return reduced[:size]
        return dist.all_reduce(joined, async_op=True).get_future().then(split)

    def _finish_compute(self, step: _Step) -> None:
        now = time.monotonic()
        if step.cuda_start is not None:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            device_seconds = step.cuda_start.elapsed_time(end) / 1000.0
        else:
            device_seconds = now - step.compute_start
        factor = self._slowdown.current() if self._slowdown.enabled else 1.0
        if factor > 1.0:
            step.emulated_seconds = EmulatedSlowdown.sleep_seconds(
                factor, now - step.compute_start, time.process_time() - step.cpu_start)
            time.sleep(step.emulated_seconds)
        step.compute_seconds = device_seconds + step.emulated_seconds
        step.compute_end = time.monotonic()

    def _control_values(self, step: _Step) -> list[float]:
        self._handle_controls()
        values = control_layout.Control(
            local_batch=step.local_batch,
            loss_sum=(step.loss or 0.0) * step.local_batch if step.local_batch else 0.0,
            leave=self._wants_to_leave(), checkpoint=self._checkpoint_asked)
        if self.rank == 0:
            chosen = self._membership.plan_at(self._assignment, step.index + 1)
            if len(chosen.batches) != self.world_size:
                chosen = self._assignment
            values.plan = list(chosen.batches)
            values.accumulation_steps = max(1, chosen.accumulation_steps)
            values.learning_rate = chosen.learning_rate
            values.total_steps = chosen.total_steps
            values.sample_efficiency = chosen.sample_efficiency or 1.0
        return values.encode(self.world_size)

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of this rank's mean loss over its local batch, with the gradients all-reduced
        weighted by batch (call it instead of loss.backward(); once per step)."""
        step = self._step
        if step is None:
            raise UsageError("job.backward(loss) outside a step: call it inside "
                             "`for batch in job.data_loader(...)`, once per batch")
        if step.summed is not None or step.loss is not None:
            raise UsageError(f"job.backward(loss) was called twice in step {step.index}: call "
                             "it once per batch (accumulate inside one loss instead)")
        if self._model is None or self._model() is None:
            raise UsageError("job.backward(loss) before job.distributed(model): wrap the model "
                             "first, so its gradients go through Fulcrum's all-reduce")
        if not isinstance(loss, torch.Tensor):
            raise UsageError(f"job.backward(loss): loss is a {type(loss).__name__}, not a "
                             "torch.Tensor; pass the loss tensor before .item()")
        if loss.numel() != 1:
            raise UsageError(
                f"job.backward(loss): the loss has shape {list(loss.shape)}, not a scalar. Pass "
                "the mean over this rank's local batch (e.g. reduction='mean', or "
                "loss.mean()); Fulcrum weights it by the local batch itself")
        if not loss.requires_grad:
            raise UsageError("job.backward(loss): the loss does not require grad (computed under "
                             "torch.no_grad(), or detached); nothing would be trained")
        step.loss = float(loss.detach()) if step.local_batch else math.nan
        try:
            loss.reshape(()).backward()
        except RuntimeError as error:
            if not step.reducing:
                raise  # the model's own backward failed
            self._step = None
            raise CollectiveFailed(f"step {step.index} of generation {step.generation}: the "
                                   f"gradient all-reduce failed ({error}); the step is not "
                                   "committed") from error
        if step.summed is None:
            raise UsageError(
                "the gradients did not go through Fulcrum's all-reduce: the loss must come from "
                "the model returned by job.distributed(model), called in this step")
        step.backward_done = time.monotonic()
        values = step.summed.tolist()
        agreed = control_layout.Agreed.decode(values, self.world_size)
        if agreed.global_batch != step.global_batch:
            raise FulcrumError(
                f"step {step.index}: the ranks trained {agreed.global_batch} samples but this "
                f"rank's plan says {step.global_batch}: the ranks disagree on the plan "
                "(were they started with the same data_loader arguments?)")
        step.agreed = agreed
        self.last_loss = agreed.global_loss

    # -- the data ----------------------------------------------------------------------------
    def data_loader(self, dataset: Dataset, *, steps: Optional[int] = None,
                    epochs: Optional[int] = None, shuffle: bool = True,
                    seed: Optional[int] = None, **dataloader_arguments) -> "StepLoader":
        """Yields this rank's share of every global step of `dataset`, as a DataLoader built
        with `dataloader_arguments` (num_workers, collate_fn, pin_memory, ...) would. It ends
        after `steps` optimizer steps or `epochs` passes (the last step of the last epoch is
        partial), or when the job asks this rank to stop. The batch size is the plan's.
        Without steps= and epochs=, the job's spec.training.steps or .epochs; without seed=,
        the job's seed (0 outside a job)."""
        refused = [name for name in _REFUSED_LOADER_ARGUMENTS if name in dataloader_arguments]
        if refused:
            raise UsageError(
                f"job.data_loader(..., {refused[0]}=...): Fulcrum decides which samples each "
                "step's batch holds (the plan's local batch, prefix-sum shards of one "
                "permutation per epoch); leave out batch_size, sampler, batch_sampler and "
                "drop_last, and use shuffle= and seed= for the order")
        if steps is None and epochs is None:
            steps, epochs = (None, self.spec.epochs) if self.spec.epochs else (self.spec.steps,
                                                                               None)
        if seed is None:
            seed = self.spec.seed if self.spec.seed is not None else 0
        if steps is None and epochs is None and self.total_steps is None:
            raise UsageError("job.data_loader(): give steps= or epochs= (or run a job whose "
                             "spec sets training.steps), so every rank ends at the same step")
        if steps is not None and steps < 0 or epochs is not None and epochs <= 0:
            raise UsageError(f"job.data_loader(): steps={steps}, epochs={epochs}: steps must "
                             "be >= 0 and epochs >= 1")
        return StepLoader(self, dataset, steps, epochs, shuffle, seed, dataloader_arguments)

    def _open_step(self, loader: "StepLoader") -> _Step:
        batches = self._batches
        positions = shard_for_rank(self.cursor, batches, self.rank)
        global_end = self.cursor + sum(batches)
        if loader.last_position is not None:
            end = self.end_position(loader.last_position)
            positions = range(min(positions.start, end), min(positions.stop, end))
            global_end = min(global_end, end)
        return _Step(index=self.step, generation=self.generation, batches=list(batches),
                     positions=positions, global_batch=global_end - self.cursor,
                     started=time.monotonic())

    def _start_compute(self, step: _Step) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            step.cuda_start = torch.cuda.Event(enable_timing=True)
            step.cuda_start.record()
        step.compute_start = time.monotonic()
        step.cpu_start = time.process_time()
        self._step = step

    def _close_step(self, step: _Step) -> bool:
        """The step's end (the loop asked for the next batch, after its optimizer step): reports
        it and adopts what the ranks agreed. False: this rank leaves the loop."""
        self._step = None
        if step.agreed is None:
            raise UsageError(
                f"step {step.index} ended without job.backward(loss): every rank must run "
                "forward and job.backward(loss) once per batch, or the ranks fall out of step")
        agreed = step.agreed
        end = time.monotonic()
        self.step += 1
        self.cursor += agreed.global_batch
        self.equivalent_samples += agreed.global_batch * self.sample_efficiency
        report = pb.StepReport(
            generation=step.generation, step=step.index, local_batch=step.local_batch,
            compute_seconds=step.compute_seconds,
            comm_seconds=step.backward_done - step.compute_end,
            after_compute_seconds=end - step.compute_end,
            peak_memory=(torch.cuda.max_memory_allocated(self.device)
                         if self.device.type == "cuda" else _peak_resident_bytes()),
            loss=step.loss if step.local_batch else 0.0,
            step_seconds=end - step.started, data_wait_seconds=step.data_wait,
            partial=step.local_batch < step.batches[self.rank],
            step_end_seconds=end, global_loss=agreed.global_loss,
            local_gradient_squared_norm=float(step.local_squares),
            global_gradient_squared_norm=float(step.global_squares))
        self._membership.set_progress(self.generation, self.step)
        self._membership.report(report)
        self._metrics.observe_step(report.step_seconds, step.data_wait, step.local_batch,
                                   agreed.global_loss, step.generation, self.step)
        if self._sample_log is not None:
            self._sample_log.write(json.dumps({
                "step": step.index, "generation": step.generation, "rank": self.rank,
                "batches": step.batches, "cursor": self.cursor - agreed.global_batch,
                "global_batch": agreed.global_batch,
                "positions": [step.positions.start, step.positions.stop],
                "step_seconds": report.step_seconds, "compute_seconds": report.compute_seconds,
                "data_wait_seconds": step.data_wait, "unix_time": time.time(),
                "pid": os.getpid(), "checksum": self._parameter_checksum(),
                "learning_rate": self.learning_rate,  # the job's rate this step ran with
                "sample_efficiency": self.sample_efficiency,  # what its samples counted
                "local_gradient_squared_norm": report.local_gradient_squared_norm,
                "global_gradient_squared_norm": report.global_gradient_squared_norm,
                "indices": step.indices}) + "\n")
            self._sample_log.flush()
        if agreed.next_plan != self._batches:
            log.info("new batches from step %d: %s", self.step, agreed.next_plan)
            self._batches = agreed.next_plan
        self._adopt_recipe(agreed.learning_rate, agreed.total_steps, agreed.sample_efficiency)
        self.checkpoint_requested = agreed.checkpoint
        if agreed.checkpoint:
            self._checkpoint_asked = False
            self._save_checkpoint("asked by the coordinator")
        elif self.spec.checkpoint_every and self.step % self.spec.checkpoint_every == 0:
            self._save_checkpoint(f"every {self.spec.checkpoint_every} steps")
        if not agreed.leave:
            return True
        return self._leave_generation()

    def _parameter_checksum(self) -> float:
        """The sum of every parameter, for the sample log: equal on every rank after a step."""
        model = self._model() if self._model is not None else None
        if model is None:
            return math.nan
        with torch.no_grad():
            return float(sum(p.detach().double().sum().item() for p in model.parameters()))

    def _leave_generation(self) -> bool:
        """Every rank agreed to leave this generation after the step just ended: this one to
        stop (False), or all to re-form in the next generation (MembershipChanged)."""
        self._handle_controls()
        if self.stopping:
            why = ("stop" if self.stop_requested else "drain" if self.drain_requested
                   else "SIGTERM")
            log.info("leaving the job after step %d (%s)", self.step, why)
            if why != "drain" and self._last_checkpoint_step != self.step:
                self._save_checkpoint(why)  # a suspended or stopped job resumes here
            return False
        raise MembershipChanged(
            f"the job re-forms after step {self.step} (a member left or joined). To continue "
            "without a restart, register what must survive in fulcrum.State and run the loop "
            "in a function decorated with @job.elastic(state)")

    # -- elastic membership ------------------------------------------------------------------
    def elastic(self, state: State):
        """Decorates the training function `train(state, ...)`: when the job re-forms (a member
        lost or joined) it joins the next generation, brings every rank the most advanced
        State (a newcomer's too) and calls `train` again, which resumes at the agreed step.
        `train` calls job.distributed(state.model) and job.data_loader(...) itself, so both
        are rebuilt over the new group."""
        if not isinstance(state, State):
            raise UsageError("job.elastic(state): expected a fulcrum.State(model=..., "
                             f"optimizer=...), got {type(state).__name__}")

        def decorate(train):
            @functools.wraps(train)
            def run(*arguments, **keywords):
                self._state = state
                try:
                    self._recover(self._ensure_synchronised)
                except _Stopped:
                    return None
                while True:
                    try:
                        return train(state, *arguments, **keywords)
                    except MembershipChanged as error:
                        log.info("%s", error)
                        rejoin = None
                    except CollectiveFailed as error:
                        log.warning("%s", error)
                        rejoin = str(error)
                    except RuntimeError as error:
                        # A collective inside the user's own code or DDP's forward (buffers).
                        if not _is_collective_failure(error):
                            raise
                        log.warning("a collective failed in generation %d: %s", self.generation,
                                    error)
                        rejoin = "collective failed: " + str(error)
                    # Outside the except block, so the failed frames (and the old DDP, which
                    # holds the old process group) are released before the next group forms.
                    self._step = None
                    state.optimizer.zero_grad(set_to_none=True)
                    if rejoin is not None:
                        self._membership.request_rejoin(self.generation, rejoin)
                    try:
                        self._recover(self._next_generation)
                    except _Stopped:
                        log.info("stopped while waiting for the next generation, at step %d",
                                 self.step)
                        return None
            return run
        return decorate

    def _next_generation(self) -> None:
        self._join_next_generation()
        self._synchronise()

    def _recover(self, action) -> None:
        """Runs `action` until it succeeds, asking for a new generation after each failure."""
        while True:
            try:
                return action()
            except CollectiveFailed as error:
                log.warning("%s; asking the coordinator for a new generation", error)
                if not self._membership.request_rejoin(self.generation, str(error)):
                    raise
                action = self._next_generation

    def shutdown(self) -> None:
        """Sends what is left to the coordinator, leaves the process group and the stream."""
        self._membership.flush(5.0)
        self._membership.close()
        if dist.is_initialized():
            dist.destroy_process_group()
        if self._sample_log is not None:
            self._sample_log.close()
            self._sample_log = None


def _squared_norm(values: torch.Tensor) -> torch.Tensor:
    """Σ x² in float64, on the tensor's device (no host sync)."""
    return values.detach().double().square().sum()


def _empty_like_batch(batch):
    """The structure of a batch with zero samples: every tensor sliced to [:0]."""
    if isinstance(batch, torch.Tensor):
        return batch[:0]
    if isinstance(batch, dict):
        return {key: _empty_like_batch(value) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_empty_like_batch(value) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_empty_like_batch(value) for value in batch)
    return batch


class _PlanBatchSampler:
    """The DataLoader's batch sampler: this rank's indices for the steps from `cursor` on,
    assuming the plan stays; restarted when it changes. Stops at the first empty share."""

    def __init__(self, order: SampleOrder):
        self.order = order
        self.cursor = 0
        self.batches: list[int] = []
        self.rank = 0
        self.last_position: Optional[int] = None

    def __iter__(self) -> Iterator[list[int]]:
        global_batch = sum(self.batches)
        cursor = self.cursor
        while global_batch > 0:
            positions = shard_for_rank(cursor, self.batches, self.rank)
            if self.last_position is not None:
                positions = range(min(positions.start, self.last_position),
                                  min(positions.stop, self.last_position))
            if len(positions) == 0:
                return
            yield self.order.indices(positions)
            cursor += global_batch


class StepLoader:
    """Iterate it once: `for batch in job.data_loader(dataset, ...)`."""

    def __init__(self, job: Job, dataset: Dataset, steps: Optional[int], epochs: Optional[int],
                 shuffle: bool, seed: int, dataloader_arguments: dict):
        self._job = job
        self._dataset = dataset
        self.steps = steps
        self.epochs = epochs
        self.order = SampleOrder(len(dataset), seed=seed, shuffle=shuffle)
        self.last_position = epochs * len(dataset) if epochs is not None else None
        self._sampler = _PlanBatchSampler(self.order)
        self._sampler.last_position = self.last_position
        self._loader = DataLoader(dataset, batch_sampler=self._sampler, **dataloader_arguments)
        self._collate: Callable = self._loader.collate_fn
        self._empty_batch = None

    @property
    def epoch(self) -> int:
        """The epoch of the next step's first sample."""
        return self._job.cursor // len(self._dataset)

    def finished(self) -> bool:
        job = self._job
        # The job's live-edited step count wins over steps= (not over epochs=), as in the trainer.
        steps = self.steps
        if job.total_steps is not None and self.epochs is None:
            steps = job.total_steps
        if steps is not None and job.step >= steps:
            return True
        return (self.last_position is not None
                and job.equivalent_samples_left(self.last_position) == 0.0)

    def _empty(self):
        if self._empty_batch is None:
            self._empty_batch = _empty_like_batch(self._collate([self._dataset[0]]))
        return self._empty_batch

    def __iter__(self):
        job = self._job
        job._ensure_synchronised()
        iterator = None
        started_with = None  # (generation, batches, efficiency) the iterator was started from
        expected_cursor = None
        while not self.finished():
            step = job._open_step(self)
            key = (job.generation, tuple(step.batches), job.sample_efficiency)
            if iterator is None or started_with != key or expected_cursor != job.cursor:
                # A new plan or generation: batches prefetched under the old one are dropped.
                self._sampler.cursor, self._sampler.batches = job.cursor, list(step.batches)
                self._sampler.rank = job.rank
                if self.last_position is not None:
                    self._sampler.last_position = job.end_position(self.last_position)
                iterator = iter(self._loader)
                started_with = key
            expected_cursor = job.cursor + sum(step.batches)
            if step.local_batch == 0:
                batch = self._empty()
            else:
                batch = next(iterator)
            step.data_wait = time.monotonic() - step.started
            step.indices = self.order.indices(step.positions) if job._sample_log else None
            job._start_compute(step)
            try:
                yield batch
            except GeneratorExit:
                if job._step is step:  # an abandoned iteration must not close a newer step
                    job._step = None
                raise
            if not job._close_step(step):
                return


def _choose_device(device, from_job: bool = False) -> torch.device:
    """`from_job`: the device came from FULCRUM_DEVICE, which the operator sets by the job's
    gpusPerWorker, so a missing GPU is the pod's image or node, not the script's choice."""
    if device is not None:
        chosen = torch.device(device)
    elif torch.cuda.is_available():
        chosen = torch.device("cuda", torch.cuda.current_device())
    else:
        chosen = torch.device("cpu")
    if chosen.type == "cuda":
        if not torch.cuda.is_available() and from_job:
            raise UsageError(
                f"FULCRUM_DEVICE={device}: the job asks for a GPU (gpusPerWorker 1), but the "
                f"torch {torch.__version__} of image {os.environ.get('FULCRUM_IMAGE', '?')} on "
                f"node {os.environ.get('NODE_NAME', '?')} sees none: use an image with CUDA "
                "PyTorch, on a node whose GPU the pod was given")
        if not torch.cuda.is_available():
            raise UsageError(f"fulcrum.init(device={str(device)!r}): this torch sees no CUDA "
                             "device; use device='cpu'")
        if chosen.index is None:
            chosen = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(chosen)
    return chosen


def init(*, device=None, backend: Optional[str] = None, static_group: Optional[StaticGroup] = None,
         collective_timeout: float = 60.0, sample_log: Optional[str] = None, **settings) -> Job:
    """Joins this process to its Fulcrum job and forms the torch.distributed process group.

    Reads what the operator puts in the trainer pod (pod_environment.py lists the environment
    variables); keywords override them (coordinator=, job=, token_file=, coordinator_ca=,
    coordinator_insecure=, pod=, node=, host=, gpu_product=, emulated_slowdown=, slowdown_file=).
    Sends its Hello, waits for the coordinator's Assignment and forms the generation's group at
    rank 0's c10d TCPStore: NCCL on a GPU, Gloo on the CPU (backend= overrides).
    `static_group` runs a fixed group without a coordinator (tests, benchmarks).
    `sample_log`: a file that receives one JSON line per step (positions, indices, timings)."""
    environment = None
    from_job = False
    if static_group is None:
        environment = PodEnvironment.read(**settings)
        from_job = device is None and environment.device is not None
        device = device if device is not None else environment.device
    chosen = _choose_device(device, from_job)
    backend = backend or ("nccl" if chosen.type == "cuda" else "gloo")
    if backend == "nccl" and chosen.type != "cuda":
        raise UsageError("fulcrum.init(backend='nccl') needs a CUDA device; use gloo on the CPU")
    sample_log = sample_log or os.environ.get("FULCRUM_SAMPLE_LOG") or None
    if static_group is not None:
        if settings:
            raise UsageError("fulcrum.init(static_group=...) runs without a coordinator: "
                             f"leave out {sorted(settings)}")
        batches = [int(b) for b in static_group.batches]
        if not 0 <= static_group.rank < len(batches):
            raise UsageError(f"StaticGroup: rank {static_group.rank} is not among the "
                             f"{len(batches)} ranks of batches={batches}")
        host, _, port = static_group.rendezvous.rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"StaticGroup: rendezvous {static_group.rendezvous!r}: "
                             "expected HOST:PORT")
        store_server = None
        if static_group.rank == 0:
            store_server = dist.TCPStore(host, int(port), is_master=True, wait_for_workers=False)
        assignment = pb.Assignment(
            generation=1, rank=static_group.rank, world_size=len(batches),
            rendezvous_address=static_group.rendezvous, local_batch=batches[static_group.rank],
            global_batch=sum(batches), batches=batches, accumulation_steps=1,
            reason="static group")
        membership = StaticMembership(assignment)
        slowdown = EmulatedSlowdown(float(os.environ.get("FULCRUM_EMULATED_SLOWDOWN") or 1.0),
                                    os.environ.get("FULCRUM_SLOWDOWN_FILE") or None)
    else:
        store_server = dist.TCPStore(environment.host, 0, is_master=True,
                                     wait_for_workers=False)
        product, memory = environment.gpu_product or "cpu", 0
        if chosen.type == "cuda":
            # The device's own name and memory, as fulcrum-trainer reports them.
            properties = torch.cuda.get_device_properties(chosen)
            product, memory = _product_label(properties.name), int(properties.total_memory)
        hello = pb.Hello(job=environment.job, pod=environment.pod, node=environment.node,
                         gpu_product=product, gpu_memory=memory, token=environment.token,
                         store_address=f"{environment.host}:{store_server.port}")
        membership = CoordinatorLink(environment.coordinator, hello,
                                     environment.root_certificates)
        slowdown = EmulatedSlowdown(environment.emulated_slowdown, environment.slowdown_file)
    job = Job(membership, environment, chosen, backend, store_server, collective_timeout,
              slowdown, sample_log)
    try:
        job._recover(job._join_next_generation)
    except BaseException:
        job.shutdown()
        raise
    _leave_in_band_on_sigterm(job)
    return job


def _leave_in_band_on_sigterm(job: Job) -> None:
    """The first SIGTERM (Kubernetes stopping the pod) makes every rank leave after the current
    step, as fulcrum-trainer does; the loader then ends. A second one acts as it would have."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handle(number, frame):
        if job.terminated:
            signal.signal(signal.SIGTERM, previous if callable(previous) else signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
            return
        log.info("SIGTERM: leaving the job after the current step")
        job.terminated = True
    signal.signal(signal.SIGTERM, handle)
