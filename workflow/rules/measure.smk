# Measurement: the machine's provenance, then the rounds (every cell once per round, in
# fresh worker processes), and the copy-bandwidth sweep. Each job takes the host's
# benchmark lock and all local cores, and runs `python` from its own environment.


rule environment:
    output:
        f"{OUT}/environment.json",
    log:
        f"{OUT}/logs/environment.log",
    conda:
        "../envs/measure.yaml"
    threads: bench_threads
    params:
        libraries=",".join(config["grid"]["libraries"]),
    shell:
        "python -m offloadbench.jobs.environment --machine {wildcards.machine}"
        " --libraries {params.libraries} --out {output:q} --log {log:q}"


rule measure:
    input:
        environment=f"{OUT}/environment.json",
        roofs=roof_records,
        previous=previous_round,
    output:
        records=update(round_records("{round}")),
        round=f"{OUT}/raw/rounds/p{{round}}.json",
    log:
        f"{OUT}/logs/measure/p{{round}}.log",
    benchmark:
        f"{OUT}/benchmarks/measure/p{{round}}.tsv"
    conda:
        "../envs/measure.yaml"
    threads: bench_threads
    params:
        rounds=len(ROUNDS),
        grid=as_json(config["grid"]),
        settings=as_json(config["measure"]),
        raw=lambda wildcards: f"{RESULTS}/{wildcards.machine}/raw",
    message:
        "round {wildcards.round} of {params.rounds} on {wildcards.machine}: every cell once, in fresh processes"
    shell:
        "python -m offloadbench.jobs.round --round {wildcards.round} --rounds {params.rounds}"
        " --machine {wildcards.machine} --grid {params.grid:q} --settings {params.settings:q}"
        " --environment {input.environment:q} --raw {params.raw:q} --log {log:q}"


rule transfer:
    input:
        environment=f"{OUT}/environment.json",
    output:
        f"{OUT}/raw/transfer/{{device}}.json",
    log:
        f"{OUT}/logs/transfer/{{device}}.log",
    conda:
        "../envs/measure.yaml"
    threads: bench_threads
    params:
        settings=as_json(config["transfer"]),
    shell:
        "python -m offloadbench.jobs.sweep --device {wildcards.device} --machine {wildcards.machine}"
        " --settings {params.settings:q} --out {output:q} --log {log:q}"


rule roofs:
    input:
        environment=f"{OUT}/environment.json",
    output:
        f"{OUT}/raw/roofs/{{roof_device}}.json",
    log:
        f"{OUT}/logs/roofs/{{roof_device}}.log",
    conda:
        "../envs/measure.yaml"
    threads: bench_threads
    params:
        settings=as_json(config["roofs"]),
        grid=as_json(config["grid"]),
    shell:
        "python -m offloadbench.jobs.calibrate --device {wildcards.roof_device} --machine {wildcards.machine}"
        " --settings {params.settings:q} --grid {params.grid:q} --out {output:q} --log {log:q}"
