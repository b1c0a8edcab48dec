# Results already on disk -> comparisons of machines, bundles to carry results, and
# re-rendered reports; none of these measures or loads torch.


rule unbundle:
    input:
        lambda wildcards: str(BUNDLED[wildcards.source]),
    output:
        f"{RESULTS}/sources/{{source}}/environment.json",
    log:
        f"{RESULTS}/logs/unbundle/{{source}}.log",
    conda:
        "../envs/analysis.yaml"
    params:
        folder=f"{RESULTS}/sources/{{source}}",
        max_mb=config["bundle_limits"]["max_unpacked_mb"],
        max_members=config["bundle_limits"]["max_members"],
        # Unpacked again when the bundle's content changes, whatever its mtime.
        sha256=lambda wildcards: content_digest(BUNDLED[wildcards.source]),
    shell:
        "python -m offloadbench.bundles unpack {input:q} {params.folder:q} {params.max_mb} {params.max_members} {log:q}"


if len(COMPARED) >= 2:

    rule compare:
        input:
            source_inputs(COMPARED),
        output:
            comparison=f"{COMPARISON}/comparison.csv",
            provenance=f"{COMPARISON}/provenance_diff.csv",
            md=f"{COMPARISON}/report.md",
            html=report(
                f"{COMPARISON}/report.html",
                caption="../report/comparison.rst",
                category="Comparison",
            ),
            latex=f"{COMPARISON}/tables/comparison.tex",
            claims=f"{COMPARISON}/claims.tex",
            figures=[
                f"{COMPARISON}/figures/{name}.{kind}"
                for name in COMPARE_FIGURE_NAMES
                for kind in ("pdf", "png")
            ],
        log:
            f"{COMPARISON}/logs/compare.log",
        conda:
            "../envs/analysis.yaml"
        params:
            # the sample budget bounds results from elsewhere; this run's own are not refused by it
            sources=[
                (
                    s.label,
                    str(s.folder),
                    (
                        UNBOUNDED_SAMPLES
                        if s.measured_here
                        else config["bundle_limits"]["max_samples"]
                    ),
                )
                for s in COMPARED
            ],
            analysis=config["analysis"],
            out=COMPARISON,
        script:
            "../scripts/compare.py"

else:

    rule compare:
        log:
            f"{RESULTS}/logs/compare.log",
        conda:
            "../envs/analysis.yaml"
        shell:
            "echo \"error: config key compare: name at least two machines, e.g. --config compare='[auto, tests/data/h200]'\" >&2; exit 1"


rule render_source:
    input:
        lambda wildcards: source_inputs(
            [s for s in RENDERED if s.label == wildcards.source]
        ),
    output:
        report=f"{RESULTS}/rendered/{{source}}/report.html",
        timings=f"{RESULTS}/rendered/{{source}}/timings.csv",
    log:
        f"{RESULTS}/logs/render/{{source}}.log",
    conda:
        "../envs/analysis.yaml"
    params:
        folder=lambda wildcards: next(
            str(s.folder) for s in RENDERED if s.label == wildcards.source
        ),
        analysis=config["analysis"],
        out=f"{RESULTS}/rendered/{{source}}",
    script:
        "../scripts/render.py"


rule render:
    input:
        [f"{RESULTS}/rendered/{s.label}/report.html" for s in RENDERED],


rule bundle_machine:
    input:
        tables=[f"{OUT}/{table}.csv" for table in TABLES],
    output:
        f"{RESULTS}/{{machine}}.tar.gz",
    log:
        f"{RESULTS}/logs/bundle/{{machine}}.log",
    conda:
        "../envs/analysis.yaml"
    params:
        folder=lambda wildcards: f"{RESULTS}/{wildcards.machine}",
        config=as_json(dict(config)),
    shell:
        "python -m offloadbench.bundles make {params.folder:q} {output:q} {wildcards.machine} {params.config:q} {log:q}"


rule bundle:
    input:
        [f"{RESULTS}/{machine}.tar.gz" for machine in MACHINES],
