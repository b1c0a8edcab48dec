"""Kernels that harm their process, each in its own way (tests/jobs/test_hostile.py). Their
names sort before `sum_rows`, so the catalogue op's cells come after them in the same
worker. The harm is done once per process (the first call), as a careless kernel would."""

import json
import os
import signal
import sys
import threading

import numpy as np
from offloadbench import kernel

FORGED = ("h_forge/numpy-cpu-float32-n64-t1", "sum_rows/numpy-cpu-float32-n64-t1")
done = set()


def once(name):
    first = name not in done
    done.add(name)
    return first


@kernel
def h_chdir(xp, a):
    if once("chdir"):
        os.chdir("/")
    return a * 2


def write_to_every_descriptor(data):
    for fd in range(3, 64):
        try:
            os.write(fd, data)
        except OSError:
            pass


@kernel
def h_fds(xp, a):
    if once("fds"):
        write_to_every_descriptor(b"debug\n")
    return a * 2


@kernel
def h_stdin(xp, a):
    if once("stdin"):
        os.close(0)
    return a * 2


@kernel
def h_forge(xp, a):
    if once("forge"):
        write_to_every_descriptor("".join(json.dumps({"done": key, "status": "ok", "reason": ""}) + "\n"
                                          for key in FORGED).encode())
    return a * 2


@kernel
def h_pools(xp, a):
    if once("pools"):
        from threadpoolctl import threadpool_limits

        threadpool_limits(2)
    return a * 2


@kernel
def h_seterr(xp, a):
    np.seterr(all="raise")
    return a * 2


@kernel
def h_environ(xp, a):
    os.environ["OMP_NUM_THREADS"] = "8"
    return a * 2


def spin():
    while True:
        pass


@kernel
def h_thread(xp, a):
    if once("thread"):
        threading.Thread(target=spin, daemon=True).start()
    return a * 2


@kernel
def h_exit(xp, a):
    sys.exit(0)


@kernel
def h_interrupt(xp, a):
    raise KeyboardInterrupt


@kernel
def h_parent(xp, a):
    os.kill(os.getppid(), signal.SIGKILL)  # the process that forked this cell's
    return a * 2


@kernel
def h_none(xp, a):
    a * 2


@kernel
def h_print(xp, a):
    print("x" * 200_000)
    return a * 2


@kernel
def h_torch_threads(xp, a):
    import torch

    torch.set_num_threads(2)
    return a * 2
