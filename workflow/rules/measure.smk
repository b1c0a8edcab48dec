# Measurement: the machine's provenance, its roofs and copy-bandwidth sweep, then the rounds
# (every cell once per round, in fresh worker processes, each group of compared cells in one
# bout) and the extra rounds that settle undecided verdicts. Each rule runs the job module
# of its own name; each job takes the host's benchmark lock and all local cores, and runs
# `python` from its own environment.


rule environment:
    output:
        f"{OUT}/environment.json",
    log:
        f"{OUT}/logs/environment.log",
    group:
        "measure-{machine}"
    conda:
        "../envs/measure.yaml"
    threads: bench_threads
    resources:
        **MEASURING_RESOURCES,
        runtime=10,
    params:
        libraries=",".join(config["grid"]["libraries"]),
        compiled_on=",".join(sorted({c.device for c in CELLS if c.compiled})),
    shell:
        "python -m offloadbench.jobs.environment --machine {wildcards.machine}"
        " --libraries {params.libraries} --compiled-on '{params.compiled_on}'"
        " --out {output:q} --log {log:q}"


rule settings:
    output:
        f"{OUT}/{SETTINGS}",
    log:
        f"{OUT}/logs/settings.log",
    conda:
        "../envs/measure.yaml"
    params:
        measure=config["measure"],
        compile=config["compile"],
    script:
        "../scripts/write_settings.py"


rule round:
    input:
        environment=f"{OUT}/environment.json",
        settings=f"{OUT}/{SETTINGS}",
        before=earlier_measurements,
        # an edited kernel is measured again (the files are read here, never imported)
        kernels=config["kernels"],
    output:
        f"{OUT}/raw/{round_relpath('{round}')}",
    log:
        f"{OUT}/logs/rounds/round-{{round}}.log",
    benchmark:
        f"{OUT}/benchmarks/rounds/round-{{round}}.tsv"
    group:
        "measure-{machine}"
    conda:
        "../envs/measure.yaml"
    threads: bench_threads
    resources:
        **MEASURING_RESOURCES,
        runtime=round_runtime,
    params:
        processes=len(ROUNDS),
        grid=as_json(GRID),
        kernels=as_json(config["kernels"]),
        raw=f"{OUT}/raw",
    message:
        "round {wildcards.round} of {params.processes} on {wildcards.machine}: every cell once, in fresh processes, each group in one bout"
    shell:
        "python -m offloadbench.jobs.round --round {wildcards.round} --processes {params.processes}"
        " --machine {wildcards.machine} --grid {params.grid:q} --settings {input.settings:q}"
        " --environment {input.environment:q} --raw {params.raw:q} --kernels {params.kernels:q}"
        " --log {log:q}"


rule settle:
    input:
        environment=f"{OUT}/environment.json",
        settings=f"{OUT}/{SETTINGS}",
        rounds=ROUND_MANIFESTS,
        kernels=config["kernels"],
    output:
        SETTLE_RECORD,
    log:
        f"{OUT}/logs/rounds/settle.log",
    group:
        "measure-{machine}"
    conda:
        "../envs/measure.yaml"
    threads: bench_threads
    resources:
        **MEASURING_RESOURCES,
        runtime=settle_runtime,
    params:
        grid=as_json(GRID),
        analysis=as_json(config["analysis"]),
        kernels=as_json(config["kernels"]),
        raw=lambda wildcards: f"{RESULTS}/{wildcards.machine}/raw",
    message:
        "extra rounds on {wildcards.machine} until the verdicts settle (up to measure.max_processes per cell)"
    shell:
        "python -m offloadbench.jobs.settle --machine {wildcards.machine} --grid {params.grid:q}"
        " --settings {input.settings:q} --analysis {params.analysis:q} --environment {input.environment:q}"
        " --raw {params.raw:q} --kernels {params.kernels:q} --out {output:q}"
        " --log {log:q}"


if config["roofs"]["devices"]:

    rule roofs:
        input:
            environment=f"{OUT}/environment.json",
        output:
            [f"{OUT}/raw/roofs/{device}.json" for device in config["roofs"]["devices"]],
        log:
            f"{OUT}/logs/roofs.log",
        group:
            "measure-{machine}"
        conda:
            "../envs/measure.yaml"
        threads: bench_threads
        resources:
            **MEASURING_RESOURCES,
            runtime=20,
        params:
            devices=",".join(config["roofs"]["devices"]),
            settings=as_json(config["roofs"]),
            grid=as_json(GRID),
            folder=f"{OUT}/raw/roofs",
            lock_timeout_s=config["measure"]["lock_timeout_s"],
        shell:
            "python -m offloadbench.jobs.roofs --devices {params.devices} --machine {wildcards.machine}"
            " --settings {params.settings:q} --grid {params.grid:q} --environment {input.environment:q}"
            " --out-dir {params.folder:q} --lock-timeout-s {params.lock_timeout_s} --log {log:q}"


if config["transfer"]["devices"]:

    rule transfer:
        input:
            environment=f"{OUT}/environment.json",
            roofs=ROOF_RECORDS,
        output:
            [
                f"{OUT}/raw/transfer/{device}.json"
                for device in config["transfer"]["devices"]
            ],
        log:
            f"{OUT}/logs/transfer.log",
        group:
            "measure-{machine}"
        conda:
            "../envs/measure.yaml"
        threads: bench_threads
        resources:
            **MEASURING_RESOURCES,
            runtime=20,
        params:
            devices=",".join(config["transfer"]["devices"]),
            settings=as_json(config["transfer"]),
            folder=f"{OUT}/raw/transfer",
            lock_timeout_s=config["measure"]["lock_timeout_s"],
        shell:
            "python -m offloadbench.jobs.transfer --devices {params.devices} --machine {wildcards.machine}"
            " --settings {params.settings:q} --environment {input.environment:q}"
            " --out-dir {params.folder:q} --lock-timeout-s {params.lock_timeout_s} --log {log:q}"
