"""A kernels file whose import is expensive and leaves a mark: the config check must never run it."""

import os

import torch  # noqa: F401 - what a user's kernels file may well do
from offloadbench import kernel

open(os.environ["KERNEL_IMPORT_MARK"], "w").close()


@kernel
def heavy(xp, a):
    return a + 1
