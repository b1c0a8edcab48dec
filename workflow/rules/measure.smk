# One job per cell. A shell command, not `script:`, keeps snakemake and pandas out of the
# measuring process; the job takes the host's benchmark lock and all local cores.


rule environment:
    output:
        f"{OUT}/environment.json",
    log:
        f"{OUT}/logs/environment.log",
    conda:
        "../../environment.yml"
    threads: bench_threads
    params:
        machine=MACHINE,
    script:
        "../scripts/capture_environment.py"


rule measure:
    input:
        environment=f"{OUT}/environment.json",
    output:
        f"{OUT}/raw/{{op}}/{{cell}}.json",
    log:
        f"{OUT}/logs/measure/{{op}}/{{cell}}.log",
    benchmark:
        f"{OUT}/benchmarks/measure/{{op}}/{{cell}}.tsv"
    conda:
        "../../environment.yml"
    threads: bench_threads
    params:
        machine=MACHINE,
        settings=json.dumps(config["measure"], sort_keys=True),
    shell:
        '"$OFFLOADBENCH_PYTHON" "$OFFLOADBENCH_SCRIPTS/measure_cell.py" --op {wildcards.op} --cell {wildcards.cell}'
        " --machine {params.machine} --settings {params.settings:q}"
        ' --environment "{input.environment}" --out "{output}" --log "{log}"'


rule transfer:
    input:
        environment=f"{OUT}/environment.json",
    output:
        f"{OUT}/raw/transfer/{{device}}.json",
    log:
        f"{OUT}/logs/transfer/{{device}}.log",
    conda:
        "../../environment.yml"
    threads: bench_threads
    params:
        machine=MACHINE,
        settings=json.dumps(config["transfer"], sort_keys=True),
    shell:
        '"$OFFLOADBENCH_PYTHON" "$OFFLOADBENCH_SCRIPTS/transfer_sweep.py" --device {wildcards.device}'
        " --machine {params.machine} --settings {params.settings:q}"
        ' --out "{output}" --log "{log}"'
