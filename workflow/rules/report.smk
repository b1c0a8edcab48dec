# Tables, figures and provenance -> report.md and a self-contained report.html.


rule report:
    input:
        timings=f"{OUT}/timings.csv",
        speedups=f"{OUT}/speedups.csv",
        thread_scaling=f"{OUT}/thread_scaling.csv",
        transfer=f"{OUT}/transfer.csv",
        environment=f"{OUT}/environment.json",
        figures=figure_files("png"),
    output:
        md=f"{OUT}/report.md",
        html=report(
            f"{OUT}/report.html", caption="../report/report.rst", category="Report"
        ),
    log:
        f"{OUT}/logs/report.log",
    conda:
        "../envs/analysis.yaml"
    params:
        settings=dict(config),
    script:
        "../scripts/write_report.py"
