from .kernels import kernel  # noqa: F401 - `from offloadbench import kernel` in the user's kernels files
