"""offloadbench: when does moving NumPy work to PyTorch (CPU or GPU) pay off on this machine?

config -> grid of cells -> rounds of measurement (fresh processes) -> tables -> figures -> report.
"""

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/compare.smk"


onstart:
    announce_estimates()


rule all:
    default_target: True
    input:
        final_targets(),
