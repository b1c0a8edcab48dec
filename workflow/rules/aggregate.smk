# Raw records -> tidy tables (pandas): one row per cell, speedups, thread scaling, the
# decisions, copies and roofs; and beside them the judging policy (δ, confidence level)
# they were judged with, which every later rule labels its intervals by.


rule aggregate:
    input:
        rounds=ROUND_MANIFESTS,
        settle=SETTLE_RECORD,
        transfer=TRANSFER_RECORDS,
        roofs=ROOF_RECORDS,
        environment=f"{OUT}/environment.json",
    output:
        timings=f"{OUT}/timings.csv",
        speedups=f"{OUT}/speedups.csv",
        thread_scaling=f"{OUT}/thread_scaling.csv",
        decisions=f"{OUT}/decisions.csv",
        decision_sizes=f"{OUT}/decision_sizes.csv",
        losses=f"{OUT}/losses.csv",
        controls=f"{OUT}/controls.csv",
        memory=f"{OUT}/memory.csv",
        resident=f"{OUT}/resident.csv",
        states=f"{OUT}/states.csv",
        flags=f"{OUT}/flags.csv",
        transfer=f"{OUT}/transfer.csv",
        roofs=f"{OUT}/roofs.csv",
        judging=f"{OUT}/{JUDGING}",
    log:
        f"{OUT}/logs/aggregate.log",
    conda:
        "../envs/analysis.yaml"
    params:
        analysis=config["analysis"],
        grid=GRID,
        kernels=config["kernels"],
        raw=lambda wildcards: f"{RESULTS}/{wildcards.machine}/raw",
    script:
        "../scripts/aggregate.py"
