"""Figure captions: one text per figure, for the report and for `snakemake --report`."""

CAPTIONS = {
    "speedup": (
        "Device-resident speedup of PyTorch over NumPy on the CPU (baseline: NumPy at the same "
        "thread count; GPU cells against NumPy on all cores). Bands: 95% CI of the ratio, across "
        "processes where the cells were measured in several; dashed line: no difference."
    ),
    "copy_cost": (
        "GPU speedup over NumPy with the data already on the device (solid) and with the "
        "host-device copies counted (dashed); the gap is what the copies cost. Dotted line: "
        "break-even size."
    ),
    "transfer_overhead": (
        "Share of the time of each device cell spent copying inputs to the device, computing, "
        "copying the result back (and plotting, for compute-then-plot)."
    ),
    "bandwidth": (
        "Host-device copy bandwidth against copy size, per direction and host memory kind, with "
        "the 95% CI; dotted line: the link's theoretical rate."
    ),
    "throughput": (
        "Achieved throughput (FLOP model ÷ time) with the 95% CI as error bars."
    ),
}
