# Tables, figures and provenance -> report.md and a self-contained report.html.


rule report:
    input:
        timings=f"{OUT}/timings.csv",
        speedups=f"{OUT}/speedups.csv",
        thread_scaling=f"{OUT}/thread_scaling.csv",
        decisions=f"{OUT}/decisions.csv",
        decision_sizes=f"{OUT}/decision_sizes.csv",
        losses=f"{OUT}/losses.csv",
        states=f"{OUT}/states.csv",
        controls=f"{OUT}/controls.csv",
        memory=f"{OUT}/memory.csv",
        resident=f"{OUT}/resident.csv",
        flags=f"{OUT}/flags.csv",
        transfer=f"{OUT}/transfer.csv",
        roofs=f"{OUT}/roofs.csv",
        environment=f"{OUT}/environment.json",
        settings=f"{OUT}/{SETTINGS}",
        judging=f"{OUT}/{JUDGING}",
        rounds=ROUND_MANIFESTS,
        settle=SETTLE_RECORD,
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
        analysis=config["analysis"],
    script:
        "../scripts/write_report.py"


rule latex:
    input:
        timings=f"{OUT}/timings.csv",
        speedups=f"{OUT}/speedups.csv",
        transfer=f"{OUT}/transfer.csv",
        decisions=f"{OUT}/decisions.csv",
        decision_sizes=f"{OUT}/decision_sizes.csv",
        losses=f"{OUT}/losses.csv",
        states=f"{OUT}/states.csv",
        controls=f"{OUT}/controls.csv",
        judging=f"{OUT}/{JUDGING}",
    output:
        timings=f"{OUT}/tables/timings.tex",
        speedups=f"{OUT}/tables/speedups.tex",
        transfer=f"{OUT}/tables/transfer.tex",
        decisions=f"{OUT}/tables/decisions.tex",
        claims=f"{OUT}/claims.tex",
    log:
        f"{OUT}/logs/latex.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../scripts/write_latex.py"
