# Tables -> paper-ready figures (seaborn), each as vector PDF and 300-dpi PNG.


rule figure:
    input:
        timings=f"{OUT}/timings.csv",
        speedups=f"{OUT}/speedups.csv",
        transfer=f"{OUT}/transfer.csv",
        roofs=f"{OUT}/roofs.csv",
        memory=f"{OUT}/memory.csv",  # the memory figure's device lines
        judging=f"{OUT}/{JUDGING}",  # every interval labelled at its level
    output:
        pdf=f"{OUT}/figures/{{figure}}.pdf",
        png=report(
            f"{OUT}/figures/{{figure}}.png",
            caption="../report/figure.rst",
            labels={"figure": "{figure}"},
            category="Figures",
        ),
    log:
        f"{OUT}/logs/figures/{{figure}}.log",
    conda:
        "../envs/analysis.yaml"
    params:
        caption=lambda wildcards: caption_of(wildcards.figure),
    script:
        "../scripts/draw_figure.py"
