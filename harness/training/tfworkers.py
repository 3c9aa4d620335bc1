"""TensorFlow's launcher: one process per local worker, each told the whole cluster.

MultiWorkerMirroredStrategy has no launcher; each worker reads ``TF_CONFIG``
(every worker's address and its own index) and they find each other.  This
process starts this node's workers, waits, and when one fails it kills the
others at once: a worker whose peer died would wait in a collective until the
cell's timeout.

``python -m dlbench.harness.training.tfworkers WORKERS NODE_RANK DEVICES KIND IN OUT``
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    workers, node_rank, devices, cell = argv[0].split(","), int(argv[1]), int(argv[2]), argv[3:]
    procs = []
    for local in range(devices):
        rank = node_rank * devices + local
        env = dict(
            os.environ,
            DLBENCH_RANK=str(rank),
            DLBENCH_LOCAL_RANK=str(local),
            DLBENCH_WORLD_SIZE=str(len(workers)),
            TF_CONFIG=json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}}),
        )
        if os.environ.get("DLBENCH_GPU_PER_WORKER"):
            env["CUDA_VISIBLE_DEVICES"] = str(local)
        procs.append(subprocess.Popen([sys.executable, "-m", "dlbench.harness.cells.cell", *cell], env=env))
    status = 0
    while procs:
        for p in list(procs):
            code = p.poll()
            if code is None:
                continue
            procs.remove(p)
            if code != 0 and status == 0:
                status = code if code > 0 else 128 - code
                print(
                    f"tfworkers: a worker exited with status {code}; stopping its peers",
                    file=sys.stderr,
                    flush=True,
                )
                for other in procs:
                    other.send_signal(signal.SIGKILL)
        time.sleep(0.2)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
