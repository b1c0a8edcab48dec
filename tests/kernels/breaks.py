"""A kernel that forces a graph break: Dynamo cannot compile a print."""

from offloadbench import kernel


@kernel
def talkative(xp, a):
    b = a * 2
    print("halfway")
    return b + 1
