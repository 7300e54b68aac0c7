#!/usr/bin/env python3
"""CPU test of compare_pytorch.median_ms, the anchors' timing loop, with a stand-in for torch whose
CUDA events read a simulated GPU clock: the loop times at least 0.3 s of calls however short a call
is (the chapters' Google Benchmark rows do, MinTime(0.3)), after at least two untimed calls, and
queues `before` ahead of every call."""
import math
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class FakeGpu:
    """The simulated GPU: `now` (ms) advances by a call's duration when a call runs."""
    now = 0.0


class FakeEvent:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        self.t = FakeGpu.now

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return other.t - self.t


def install_fake_torch():
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(Event=FakeEvent, synchronize=lambda: None)
    torch.float32 = torch.float16 = torch.bfloat16 = object()
    nn = types.ModuleType("torch.nn")
    functional = types.ModuleType("torch.nn.functional")
    attention = types.ModuleType("torch.nn.attention")
    attention.SDPBackend = types.SimpleNamespace(MATH=0, EFFICIENT_ATTENTION=1, FLASH_ATTENTION=2, CUDNN_ATTENTION=3)
    attention.sdpa_kernel = None
    torch.nn = nn
    nn.functional, nn.attention = functional, attention
    sys.modules.update({"torch": torch, "torch.nn": nn, "torch.nn.functional": functional,
                        "torch.nn.attention": attention})


def run(call_ms, durations=None):
    """median_ms of a call of call_ms (or of `durations` in turn); returns (median, calls, befores)."""
    import compare_pytorch
    compare_pytorch.time = types.SimpleNamespace(perf_counter=lambda: FakeGpu.now / 1e3)  # the host waits on the GPU
    counts = {"calls": 0, "before": 0}

    def fn():
        d = durations[counts["calls"] % len(durations)] if durations else call_ms
        FakeGpu.now += d
        counts["calls"] += 1

    def before():
        counts["before"] += 1

    median = compare_pytorch.median_ms(fn, before=before)
    return median, counts["calls"], counts["before"]


def main():
    install_fake_torch()
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    # A short call (cuDNN's forward at 1k, D = 128 on an H200): 0.3 s of timed calls, far past 100.
    median, calls, befores = run(0.24)
    warmup, timed = math.ceil(100 / 0.24), math.ceil(300 / 0.24)
    check(abs(median - 0.24) < 1e-9, f"median of 0.24 ms calls is 0.24 (got {median})")
    check(calls == warmup + timed, f"0.1 s untimed, then 0.3 s timed: {warmup} + {timed} calls (got {calls}), "
                                   "no cap on the count")
    check(befores == calls, f"before() ahead of every call, untimed ones too ({befores} of {calls})")

    # A long call (the math backend at 16k): two untimed calls, then at least five timed ones.
    FakeGpu.now = 0.0
    median, calls, _ = run(1000.0)
    check(abs(median - 1000.0) < 1e-9, "median of 1 s calls is 1 s")
    check(calls == 7, f"two untimed and five timed calls of 1 s (got {calls})")

    # The median, not the mean: one slow call in nine does not move it.
    FakeGpu.now = 0.0
    median, _, _ = run(None, durations=[1.0] * 8 + [50.0])
    check(abs(median - 1.0) < 1e-9, f"one slow call in nine leaves the median at 1 ms (got {median})")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
