"""The capture backends' contract, checked on the recorder (the CPU stand-in for CUDA graphs): host reads are
refused inside a captured step, capture leaves what it must unchanged, a replay overwrites the outputs capture
returned, and one function decides which device captures."""

from collections.abc import Callable

import pytest
import torch

from nmt.device.capture import (
    CUDA_GRAPHS,
    HostReadError,
    Recorder,
    capture_for,
    emulating,
    host_reads_refused,
)

X = torch.arange(5.0)

HOST_READS: dict[str, Callable[[], object]] = {
    "item": lambda: X[0].item(),
    "tolist": lambda: X.tolist(),
    "bool": lambda: bool(X[0]),
    "if on a tensor": lambda: 1 if X.sum() > 0 else 0,
    "int": lambda: int(X[1]),
    "a tensor as an index": lambda: [0, 1, 2][X.long()[1]],
    "boolean indexing": lambda: X[X > 1],
    "boolean assignment": lambda: X.clone().__setitem__(X > 1, 0.0),
    "nonzero": lambda: X.nonzero(),
    "repeats from a tensor": lambda: X.repeat_interleave(torch.tensor([1, 1, 1, 1, 2])),
    "to the host": lambda: X.cpu(),
}


@pytest.mark.parametrize("read", HOST_READS.values(), ids=HOST_READS.keys())
def test_host_reads_are_refused_inside_a_captured_step(read: Callable[[], object]) -> None:
    read()  # fine outside
    with pytest.raises(HostReadError), host_reads_refused():
        read()


def test_device_work_is_allowed_inside_a_captured_step() -> None:
    with host_reads_refused():
        out = (X * 2).softmax(0)[torch.tensor([0, 1])].repeat_interleave(2).masked_fill(X[:4] > 1, 0.0)
    assert out.shape == (4,)


def test_capture_leaves_what_it_must_and_replays_overwrite_the_outputs() -> None:
    recorder, counter = Recorder(), torch.zeros(())
    source = torch.tensor([1.0, 2.0])

    def step() -> torch.Tensor:
        counter.add_(1)  # state a real capture would not touch
        return source * 2

    recorder.warm_up(step, [counter])
    graph = recorder.capture(step, None, [counter])
    assert counter.item() == 0 and recorder.captures == 1 and recorder.replays == 0
    outputs = graph.outputs
    source.copy_(torch.tensor([3.0, 4.0]))  # new inputs are copied into the captured ones
    assert graph.replay() is outputs  # the same tensor, overwritten, as a graph's static output
    assert outputs is not None and outputs.tolist() == [6.0, 8.0]
    assert counter.item() == 1 and recorder.replays == 1


def test_a_step_that_reads_the_host_fails_to_capture() -> None:
    with pytest.raises(HostReadError):
        Recorder().capture(lambda: X * X.sum().item(), None, [])


def test_one_function_decides_which_device_captures() -> None:
    cpu = torch.device("cpu")
    assert capture_for(torch.device("cuda")) is CUDA_GRAPHS
    assert capture_for(cpu) is None
    recorder = Recorder()
    with emulating(recorder):
        assert capture_for(cpu) is recorder
    assert capture_for(cpu) is None
