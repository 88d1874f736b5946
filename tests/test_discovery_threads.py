"""First use of the registries from many threads at once, in fresh processes.

Discovery runs once under a lock and only a fully loaded registry is published: no thread may
see a registry that is still being filled ("no op named 'tanh' is registered").
"""

import json
import os
import subprocess
import sys

THREADS = 8
REPETITIONS = 20
RACE = f"""
import json, threading, warnings
import numpy as np
import sadl

barrier = threading.Barrier({THREADS})
errors = []

def first_use(i):
    barrier.wait()
    try:
        if i % 2:
            out = sadl.ops.tanh(sadl.tensor(np.array([0.5])))
            assert abs(out.item() - np.tanh(0.5)) < 1e-6
        else:
            layer = sadl.nn.Linear(2, 3)
            assert layer.weight.shape == (3, 2)
    except BaseException as exc:
        errors.append(f"thread {{i}}: {{type(exc).__name__}}: {{exc}}")

with warnings.catch_warnings():
    warnings.simplefilter("error")
    threads = [threading.Thread(target=first_use, args=(i,)) for i in range({THREADS})]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
print(json.dumps(errors))
"""


def test_first_use_from_eight_threads_in_fresh_processes_never_sees_a_partial_registry():
    env = {**os.environ, "SADL_PLUGINS_STRICT": "1"}
    failures = []
    for batch in range(0, REPETITIONS, 4):  # four fresh processes at a time
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", RACE],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(min(4, REPETITIONS - batch))
        ]
        for run in runs:
            out, err = run.communicate(timeout=120)
            assert run.returncode == 0, err
            failures += json.loads(out)
    assert failures == [], f"{len(failures)} of {THREADS * REPETITIONS} first uses failed"
