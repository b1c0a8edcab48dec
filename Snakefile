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


# Everything but measuring runs where Snakemake runs: these jobs take seconds, and a
# cluster job costs several seconds to schedule.
localrules:
    all,
    settings,
    aggregate,
    figure,
    report,
    latex,
    compare,
    render_source,
    render,
    unbundle,
    bundle_machine,
    bundle,


onstart:
    guard_executor()
    announce_compiled()
    announce_estimates()


onsuccess:
    print_answers()


onerror:
    echo_failures()


rule all:
    default_target: True
    input:
        final_targets(),
