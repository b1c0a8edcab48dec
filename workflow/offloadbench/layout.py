"""Names of the outputs under results/<machine>/, shared by the Snakefile and the package.

Kept free of heavy imports: the Snakefile reads it at parse time.
"""

FIGURE_NAMES = ("speedup", "copy_cost", "transfer_overhead", "bandwidth", "throughput")
FIGURE_FORMATS = ("pdf", "png")
TABLES = ("timings", "speedups", "thread_scaling", "transfer")
