"""Price a kernel on the simulator under many cost tables, fast: the kernel is recorded once
(in its own process, as the harness does) and each table re-prices the recorded trace by a
timing-only replay in this process. The latency is the one `benchmark_kernel` reports on
device `sim` with that table (the same harness code sets up the call).
"""
import os
import sys
import types

DEVICE_DIR = os.path.dirname(os.path.abspath(__file__))
SIM_DIR = os.path.dirname(os.path.dirname(DEVICE_DIR))
HARNESS_DIR = os.path.join(os.path.dirname(SIM_DIR), "harness")
for _p in (SIM_DIR, HARNESS_DIR, DEVICE_DIR):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import autocomp_harness as H  # noqa: E402
from harnesslib.failures import HarnessFailure  # noqa: E402
from costtables import costs  # noqa: E402


class PriceError(Exception):
    """A kernel that cannot be priced (the message says why)."""


class Kernel:
    """One kernel + problem, recorded once, priced under any cost table of its target."""

    def __init__(self, kernel_path, problem_path, target, kernel_name=None):
        from harnesslib.problem import (load_problem, output_names,  # noqa: PLC0415
                                        positional_parameters)
        from harnesslib.refcache import RefCache  # noqa: PLC0415
        from harnesslib.simdev import SimDevice  # noqa: PLC0415
        self.target = target
        self.kernel_path = os.path.abspath(kernel_path)
        try:
            problem = load_problem(problem_path)
            seeds = list(problem.seeds)[:1]
            inputs = problem.make_inputs(seeds[0])
            params = list(inputs)
            if problem.outputs_spec is not None:
                params += output_names(problem, inputs)
            bind_name, bind = None, None
            if problem.bind == "position":
                bind_name, kparams = positional_parameters(
                    self.kernel_path, len(params), kernel_name or problem.kernel_name)
                bind = dict(zip(params, kparams))
                params = kparams
            self.device = SimDevice(target, self.kernel_path,
                                    problem_path=os.path.abspath(problem_path))
            handle = self.device.load_kernel(self.kernel_path, params, kernel_name,
                                             bind_name or problem.kernel_name)
            args = types.SimpleNamespace(kernel_name=kernel_name, device="sim")
            self.run = H._DeviceRun(args, problem, self.device, handle, seeds, inputs,
                                    RefCache(None), target)
            self.run.bind = bind
            self.reference = self.run.reference_if_outputs_need_it(inputs, seeds[0])
        except HarnessFailure as e:
            raise PriceError("%s: %s" % (e.kind, e.message))

    def latency_us(self, table):
        """Simulated latency (us) with cost table `table` (a costs.CostTable of the target)."""
        before = costs.table(self.target)
        costs.set_table(table)
        try:
            result, _, _ = self.run.call(self.run.first_inputs, False, self.reference)
        except HarnessFailure as e:
            raise PriceError("%s: %s" % (e.kind, e.message))
        finally:
            costs.set_table(before)
        return float(result.latency_us)

    def close(self):
        session = getattr(getattr(self.run, "kernel", None), "ref", None)
        proc = getattr(session, "process", None)
        if proc is not None:
            proc.close()
