"""The trusted reference worker's commands: the survey of the secret seeds' expected outputs, FLOPs
and bytes; comparisons of a candidate's shared outputs (seeds and timed spot checks); the reference
timed alone and the eager, torch.compile and TunableOp baselines; the vetting and the device ceilings.
None of these runs a candidate's code."""

from __future__ import annotations

import dataclasses
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from ...tasks import runtime
from ..protocol import (BaselinesPrepared, CeilingsMeasured, Compared, CompareRound, CompareSeed, MeasureCeilings,
                        PrepareBaselines, Probe, Probed, SharedOutputs, Survey, Surveyed, Timed, TimeReference, Vet, Vetted)
from .compare import flatten_outputs
from .exchange import ExchangeError, SharedTensor, import_outputs, receive_fd
from .expected import Expected
from .guards import pytorch_defaults
from .rejection import Rejection
from .state import WorkerState, poison
from .timing import clock_info, clocks, clone_inputs, fresh_inputs, host_medians, local_rounds, run_interleaved, scenario_clock


class ReferenceOps(WorkerState):
    """The commands of a task's trusted worker."""

    def op_survey(self, cmd: Survey) -> Surveyed:
        """What the secret seeds' outputs should be, held here (or recomputed per comparison) for
        `op_compare`; how they look, how long the reference takes, whether a float64 truth applies;
        the reference's FLOPs and bytes."""
        self.expected = Expected(self.reference, lambda seed, p: runtime.make_inputs(self.task, seed, self.device, self.dtype, p),
                                 self.device, self.dtype, cache_bytes=int(cmd.cache_bytes),
                                 truth_max_bytes=int(self.cfg.truth_max_gb * (1 << 30)) if self.cfg.truth else -1,
                                 truth_max_seconds=self.cfg.truth_max_seconds)
        facts = self.expected.survey(cmd.seeds, cmd.binary_seeds or [])
        xs = self.inputs(cmd.seeds[0])
        from torch.utils.flop_counter import FlopCounterMode
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            out = flatten_outputs(self.reference(*xs))
        tensors = [t for t in xs + out if isinstance(t, torch.Tensor)]
        state = list(self.reference.state_dict().values())
        nbytes = sum(t.numel() * t.element_size() for t in tensors + state)
        del xs, out, tensors
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return Surveyed(facts, flops=int(fc.get_total_flops()), bytes=int(nbytes),
                        param_bytes=sum(t.numel() * t.element_size() for t in state), env=self.env())

    def op_probe(self, cmd: Probe) -> Probed:
        """One forward on the first seed's inputs: the bytes of inputs and outputs and the device memory
        it took at most, so the parent can budget the survey and the timing before they run."""
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        xs = self.inputs(cmd.seed)
        with torch.no_grad():
            out = flatten_outputs(self.reference(*xs))
        self.sync()
        nbytes = [sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor)) for ts in (xs, out)]
        peak = torch.cuda.max_memory_allocated() - base if self.device.type == "cuda" else sum(nbytes)
        del xs, out
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return Probed(nbytes[0], nbytes[1], int(peak))

    def op_compare(self, cmd: CompareSeed) -> Compared:
        """A candidate's outputs for one seed, shared by its worker, against what they should be."""
        with self.shared_outputs(cmd) as got:
            found = self.expected.compare(cmd.kind, cmd.index, got, cmd.atol, cmd.rtol, cmd.k)
        return Compared(found)

    def op_spot_check(self, cmd: CompareRound) -> Compared:
        """A candidate's timed call (shared as in `op_compare`) against the reference on that round's
        inputs, made here from the input set's seed and the round's roll, never taken from the
        candidate's process; the float64 truth decides where the plain comparison fails, with `truth`."""
        def inputs() -> list[Any]:
            return fresh_inputs(self.inputs(cmd.seed), cmd.roll, cmd.fresh)

        with self.shared_outputs(cmd) as got:
            found = self.expected.check_round(got, inputs, cmd.atol, cmd.rtol, cmd.k, cmd.truth)
        return Compared(found)

    @contextmanager
    def shared_outputs(self, cmd: SharedOutputs) -> Iterator[list[Any]]:
        """A candidate's outputs as its worker shared them (CUDA IPC handles, or a memory file the parent
        passes over the socket), all threads of the host for the comparison on the CPU (nothing is timed
        meanwhile, and the candidate's worker waits). The candidate's memory is read, never trusted: a
        description that is not one, a layout past what it shared, or a file cut short while read, is
        its doing."""
        memfd = receive_fd(self.fd_socket, 30.0) if cmd.memfd else None
        threads = torch.get_num_threads()
        if self.device.type == "cpu":
            torch.set_num_threads(os.cpu_count() or 1)
        try:
            try:
                descs = [SharedTensor.from_dict(d) if d is not None else None for d in cmd.tensors]
                tensors = import_outputs(descs, memfd)
            except (ExchangeError, TypeError, ValueError) as e:
                raise Rejection("hack_detected", f"the candidate's outputs could not be read as shared: {e}") from None
            got = [t if t is not None else v for t, v in zip(tensors, cmd.values)]
            del tensors
            try:
                yield got
            except ExchangeError as e:
                raise Rejection("hack_detected", f"the candidate's outputs could not be read as shared: {e}") from None
        finally:
            torch.set_num_threads(threads)
            if memfd is not None:
                os.close(memfd)

    def op_time_reference(self, cmd: TimeReference) -> Timed:
        """The reference timed alone, by the recipe (trusted time; also the eager baseline), with
        torch.compile interleaved if asked. With `tunableop`, PyTorch's TunableOp (cuBLAS/cuBLASLt
        algorithms tried per shape, the fastest kept) is then enabled and the reference timed again:
        the autotuned-library baseline. `scenario` "server" pauses before every call (untimed); "sustained"
        heats the device until its clock settles first."""
        timing = dataclasses.replace(self.cfg.timing, target_ms=cmd.target_ms or self.cfg.timing.target_ms)
        cfg, clock = scenario_clock(self.device, timing, cmd.scenario)
        sets = self.timing_inputs(cmd.seeds)

        host: dict[str, list[float]] = {}
        probe: list[float] = []
        cpus: list[int] = []

        def run(sides: list[tuple[str, Any]]) -> dict[str, list[float]]:
            with torch.no_grad():
                return run_interleaved(sides, sets, clock, cfg, local_rounds(len(sets)),
                                       lambda name, i, out: poison(flatten_outputs(out)), host, probe, cpus)

        before = clock_info()
        samples = run([("reference", self.reference)])
        if cmd.defaults:
            # What users run: eager and torch.compile at PyTorch's default precision, ABAB with each other.
            with pytorch_defaults():
                sides = [("reference_default", self.reference)]
                if self.compiled is not None:
                    sides.append(("compiled", self.compiled))
                samples.update(run(sides))
        if cmd.tunableop:
            if self.device.type != "cuda":
                raise Rejection("task_error", "TunableOp needs a CUDA device")
            tunable = torch.cuda.tunable
            tunable.set_filename(str(Path(cmd.out_dir) / "tunableop_results.csv"))
            tunable.enable(True)
            tunable.tuning_enable(True)
            try:
                samples.update(run([("tunableop", self.reference)]))  # the warm-up calls tune
            finally:
                tunable.enable(False)
        if cmd.release_inputs:  # a task's kept trusted worker: its timing inputs go back for the others
            self.timing_sets = sets = None  # (`run` holds them through `sets` too)
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        return Timed(samples, clocks(before, clock), **host_medians(host, probe, cpus))

    def op_prepare_baselines(self, cmd: PrepareBaselines) -> BaselinesPrepared:
        """torch.compile the reference at PyTorch's defaults and call it once, before the parent takes the
        device lock: compiling takes seconds to minutes, and nothing else needs the device meanwhile."""
        self.compiled = None
        if cmd.compiled:
            sets = self.timing_inputs(cmd.seeds)
            t0 = time.perf_counter()
            with pytorch_defaults(), torch.no_grad():
                self.compiled = torch.compile(self.reference)
                self.compiled(*clone_inputs(sets[0]))
            self.sync()
            return BaselinesPrepared(time.perf_counter() - t0)
        return BaselinesPrepared()

    def op_vet(self, cmd: Vet) -> Vetted:
        from ...tasks.vet import vet_reference
        report = vet_reference(self.reference, self.inputs, cmd.seeds, self.atol, self.rtol)
        return Vetted(report.to_dict(), self.env())

    def op_ceilings(self, cmd: MeasureCeilings) -> CeilingsMeasured:
        from .ceilings import measure_ceilings
        if self.device.type == "cpu":
            torch.set_num_threads(os.cpu_count() or 1)
        return CeilingsMeasured(measure_ceilings(self.device), self.env())
