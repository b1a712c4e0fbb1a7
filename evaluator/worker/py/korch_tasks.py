"""A KernelBench task as the worker's roles meet it: its module (trusted
reference code, built from its source), its inputs under a seed, made on the
device, and the shapes of what it returns. A leaf module: the judge, the
runners' warm-up and the worker import it; it imports none of them."""
import types

import torch


def load_task(source):
    mod = types.ModuleType("korch_task")
    exec(compile(source, "korch_task.py", "exec"), mod.__dict__)  # trusted reference
    return mod


def task_inputs(task, seed, dev):
    """The task's get_inputs() under `seed`, made on `dev` (on a GPU, made
    there: a 6 GB input is not built on the host; tensors a task builds on
    the CPU regardless are moved)."""
    torch.manual_seed(seed)
    if dev == "cpu":
        return list(task.get_inputs())
    with torch.device(dev):
        vals = list(task.get_inputs())
    return [v.to(dev) if isinstance(v, torch.Tensor) else v for v in vals]


def tensors_of(values):
    return [v for v in values if isinstance(v, torch.Tensor)]


def nbytes_of(values):
    return sum(v.numel() * v.element_size() for v in tensors_of(values))


def as_outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]
