"""What a Python call to `argument_delta()` costs, against the floor of any
call into the module (a method that does nothing). Prints ns per call and
the ratio; BENCHMARKS.md quotes it.

    pip install ./bindings/python && python3 bindings/python/bench/record.py
"""
import timeit

import stallwarden as sg

guard = sg.Guard(clock="manual")
task = guard.start("bench", idle="1h", heartbeat_interval="off")
N = 1_000_000


def per_call(stmt):
    # The best of 7 runs: the least disturbed by the rest of the machine.
    return min(timeit.repeat(stmt, number=N, repeat=7, globals=globals())) / N * 1e9


floor = per_call("task._noop()")
delta = per_call("task.argument_delta()")
output = per_call("task.output(4096, 12)")
print(f"noop method (floor)   {floor:6.1f} ns")
print(f"argument_delta()      {delta:6.1f} ns  {delta / floor:4.2f}x the floor, +{delta - floor:.1f} ns")
print(f"output(4096, 12)      {output:6.1f} ns  {output / floor:4.2f}x the floor, +{output - floor:.1f} ns")
task.finish()
