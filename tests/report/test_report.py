import pandas as pd
from offloadbench.config import validate
from offloadbench.layout import FIGURE_NAMES
from offloadbench.records import Environment, RoundRecord
from offloadbench.report.text.decisions import WEAK_NOTE
from offloadbench.report.text.markdown import Inputs, build_markdown, write_report
from offloadbench.report.text.seed import judge
from offloadbench.run_settings import RunSettings
from offloadbench.verdicts import Judging

MEASURE = RunSettings.from_config(validate({})).measure


def inputs(tables, machine="gpubox"):
    env = {"hostname": machine, "cpu_model": "Test CPU", "logical_cores": 4, "gpus": [{"name": "Test GPU", "total_memory_bytes": 2**34}]}
    return Inputs(machine, Environment.from_json(env), tables, MEASURE, validate({})["analysis"], Judging())


def test_report_states_findings_with_cis(gpu_tables):
    text = build_markdown(inputs(gpu_tables))
    assert "The largest speedup over NumPy at any size, end to end as the decisions count it, is **" in text
    assert "95% CI" in text
    assert "Offloading matmul (float32) to cuda pays " in text and " with the copies counted." in text
    assert "## Does offloading pay?" in text and "### Break-even sizes" in text
    assert "copies take" in text
    assert "of the PCIe gen 5 x16 rate (63 GB/s)" in text
    assert "pinned memory copies the largest size 2.50× as fast as pageable memory" in text
    scaling = text.split("## Thread scaling")[1].split("\n## ")[0]
    assert "| matmul | numpy | float32 | all = 4 threads |" in scaling and "faster" in scaling
    for name in FIGURE_NAMES:
        assert f"figures/{name}.png" in text


def test_each_ops_section_opens_with_its_decisions_naming_the_op(gpu_tables):
    """Read alone (an op's section is folded in the page), a decision still says which op it is."""
    text = build_markdown(inputs(gpu_tables))
    decisions = gpu_tables["decisions"]
    for op, rows in decisions.groupby("op"):
        section = text.split(f"\n### {op}\n")[1].split("\n### ")[0]
        opening = section.strip().splitlines()[:len(rows)]
        assert all(line.startswith(f"- {op} (") and "): " in line for line in opening), opening


def test_report_says_plainly_when_there_is_no_gpu(gpu_tables):
    t = gpu_tables["timings"].copy()
    cuda = t["device"] == "cuda"
    t.loc[cuda, "status"] = "skipped"
    t.loc[cuda, "reason"] = "cuda unavailable: no CUDA device is visible"
    s = gpu_tables["speedups"][gpu_tables["speedups"]["device"] == "cpu"]
    text = build_markdown(inputs({**gpu_tables, "timings": t, "speedups": s}))
    assert "**No GPU cell ran on this machine** (cuda unavailable: no CUDA device is visible)" in text
    assert "GPU half of the claim" in text
    assert "**skipped** (3): cuda unavailable" in text


def test_seed_claims_below_the_seed_size_are_not_compared(gpu_tables):
    text = build_markdown(inputs(gpu_tables))
    assert "not the seed's 10000" in text


def test_seed_claims_at_the_seed_size_get_a_verdict(gpu_tables):
    t, s = gpu_tables["timings"].copy(), gpu_tables["speedups"].copy()
    t.loc[t["size"] == 4096, "size"] = 10000
    s.loc[s["size"] == 4096, "size"] = 10000
    gpu = (s["size"] == 10000) & (s["device"] == "cuda")
    s.loc[gpu, ["end_to_end_speedup", "end_to_end_speedup_ci_low", "end_to_end_speedup_ci_high"]] = [3.0, 2.9, 3.1]
    text = build_markdown(inputs({**gpu_tables, "timings": t, "speedups": s}))
    assert "against the seed's 1.445 s" in text
    assert "against the seed's 0.0708 s" in text
    # about 28x device-resident in the synthetic data, 3x with the copies counted
    claim = next(line for line in text.splitlines() if line.startswith("- \"More than 10×"))
    assert "with the data already on the device, 27" in claim and "it **holds**" in claim
    assert "with the copies counted" in claim and "it **does not hold**" in claim


def test_the_plotting_claim_is_checked_once(gpu_tables):
    t, s = gpu_tables["timings"].copy(), gpu_tables["speedups"].copy()
    t = pd.concat([t, t.assign(op="compute_then_plot")], ignore_index=True)
    s = pd.concat([s, s.assign(op="compute_then_plot")], ignore_index=True)
    text = build_markdown(inputs({**gpu_tables, "timings": t, "speedups": s}))
    claims = [line for line in text.splitlines() if line.startswith("- Compute then plot")]
    assert len(claims) == 1 and "saving over NumPy" in claims[0]


def test_the_seed_baseline_is_numpy_on_the_most_threads_measured(gpu_tables):
    t = gpu_tables["timings"].copy()
    t["threads"] = t["threads"].replace({"all": "4"})
    widest = t[(t.op == "matmul") & (t.library == "numpy") & (t.threads == "4") & (t["size"] == t["size"].max())]
    text = build_markdown(inputs({**gpu_tables, "timings": t}))
    line = next(line for line in text.splitlines() if line.startswith("- NumPy on the CPU"))
    assert line.startswith(f"- NumPy on the CPU (4 threads) takes {widest['median_s'].iloc[0]:.4g} s")


def test_judge_needs_the_whole_ci_on_one_side():
    assert judge(11, 12, 10) == "holds"
    assert judge(8, 9, 10) == "does not hold"
    assert judge(9, 11, 10).startswith("cannot be decided")


def test_html_is_self_contained(tmp_path, gpu_tables):
    import base64

    (tmp_path / "figures").mkdir()
    for name in FIGURE_NAMES:  # stand-ins: the HTML embeds the bytes; drawing is tested in test_figures.py
        (tmp_path / "figures" / f"{name}.png").write_bytes(b"\x89PNG " + name.encode())
    write_report(inputs(gpu_tables), str(tmp_path / "report.md"), str(tmp_path / "report.html"))
    html = (tmp_path / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(FIGURE_NAMES)
    assert base64.b64encode(b"\x89PNG heatmap").decode() in html
    assert "<table>" in html and "figures/speedup.png" not in html.split("<body>")[1].split("Vector version")[0]


def test_a_headline_from_an_unstable_cell_carries_a_warning(gpu_tables):
    s = gpu_tables["speedups"].copy()
    best = s["speedup"].idxmax()
    s.loc[best, "flagged"] = True
    text = build_markdown(inputs({**gpu_tables, "speedups": s}))
    headline = next(line for line in text.splitlines() if line.startswith("- The largest speedup"))
    assert ")**†, for" in headline  # one mark, right after the number
    assert "against NumPy" in headline  # the two medians behind the ratio
    assert text.count(WEAK_NOTE) == 1


def test_the_report_says_how_the_measurement_went(gpu_tables):
    t = gpu_tables["timings"].copy()
    t.loc[t["threads"] == "all", "shares_cores"] = True
    environment = {"hostname": "gpubox", "system": {"advice": ["the machine was busy (1-minute load 3.2 on 2 cores)"]}}
    rounds = [{"round": 1, "measured_now": 30, "estimated_s": 100.0, "took_s": 150.0, "advice": []},
              {"round": 2, "measured_now": 30, "estimated_s": 100.0, "took_s": 130.0,
               "advice": ["the machine was busy (1-minute load 3.2 on 2 cores)", "other processes were using the CPU: x"]}]
    text = build_markdown(Inputs("gpubox", Environment.from_json(environment), {**gpu_tables, "timings": t},
                                 MEASURE, validate({})["analysis"], Judging(), [RoundRecord.from_json(r) for r in rounds]))
    section = text.split("## How the measurement went")[1].split("\n## ")[0]
    assert "used every core of this machine" in section and "their verdicts are weak" in section
    assert section.count("the machine was busy") == 1 and "other processes were using the CPU" in section
    assert "Measuring took 4m40s against 3m20s estimated before each round, 1.40× the estimate" in section
    assert "Every cell was measured in 2 independent processes" in section


def test_cells_of_one_process_are_said_to_have_within_process_cis(gpu_tables):
    t = gpu_tables["timings"].copy()
    t["processes"] = 1
    text = build_markdown(inputs({**gpu_tables, "timings": t}))
    assert "were measured in one process only: **their CIs cover the noise within that process" in text


def test_the_report_says_how_its_ratios_were_paired(gpu_tables):
    speedups = gpu_tables["speedups"].assign(pairing="paired in time")
    speedups.loc[speedups.index[0], "pairing"] = "paired by round"
    scaling = gpu_tables["thread_scaling"].assign(pairing="unpaired")
    text = build_markdown(inputs({**gpu_tables, "speedups": speedups, "thread_scaling": scaling}))
    section = text.split("## How the measurement went")[1].split("\n## ")[0]
    total = len(speedups) + len(scaling)
    assert f"- {len(speedups) - 1} of {total} ratios were paired in time: their two cells took turns" in section
    assert f"; 1 paired by round; {len(scaling)} unpaired (records without a shared bout" in section


def test_the_largest_speedup_is_the_decisions_end_to_end_with_the_resident_one_beside(gpu_tables):
    """The headline is the speedup the decisions use, end to end (on a GPU the copies
    counted); where the data already on the device make it faster, that is said beside it,
    so the two cannot be read as contradicting each other."""
    from offloadbench.report.text.findings import speedup_findings

    speedups = gpu_tables["speedups"]
    line = speedup_findings(speedups, Judging())[0]
    assert "end to end as the decisions count it, is **14.38× (95% CI" in line and "on cuda" in line
    assert "; with the data already on the device it is 27." in line
    best = speedups[speedups["end_to_end_verdict"] == "faster"]["end_to_end_speedup"].idxmax()
    same = speedups.copy()
    same.loc[best, "end_to_end_s"] = same.loc[best, "median_s"]
    assert "with the data already" not in speedup_findings(same, Judging())[0]
    slower = speedups.copy()
    slower.loc[best, ["end_to_end_speedup", "end_to_end_speedup_ci_low", "end_to_end_speedup_ci_high",
                      "end_to_end_verdict"]] = [0.5, 0.45, 0.55, "slower"]
    lines = speedup_findings(slower, Judging())
    assert "n = 4096" not in lines[0]  # a cell slower end to end is no headline, however fast on the device
    assert any(line.startswith("- The slowest against NumPy is matmul with torch on cuda") for line in lines)

def test_a_small_ratio_keeps_two_significant_digits_so_its_ci_is_not_rounded_wide():
    from offloadbench.report.format import fmt_ratio

    assert fmt_ratio(0.0201, 0.014, 0.028) == "0.020× (0.014–0.028)"  # not "0.02× (0.01–0.03)", thrice as wide
    assert fmt_ratio(2.1, 2.05, 2.14, "95% CI") == "2.10× (95% CI 2.05–2.14)"


def test_the_report_words_each_flag_and_each_process_left_out_from_flags_csv(gpu_tables):
    """flags.csv holds values and the records' own words; the report composes the sentences
    (a few golden texts: a noise flag, processes that disagree or failed, one left out)."""
    t = gpu_tables["timings"].copy()
    cell = t.iloc[0]
    t.loc[t.index[0], "flagged"] = True
    key = {c: cell[c] for c in ("machine", "op", "library", "device", "dtype", "size", "threads", "mode", "variant")}
    rows = [
        {"kind": "drift", "region": "compute", "amount": 0.12, "processes": 2, "of_processes": 3,
         "text": "drift: second half 12.0% slower than the first"},
        {"kind": "two_differ", "region": "", "processes": 2, "of_processes": 2, "factor": 1.5, "text": ""},
        {"kind": "disagree", "region": "compute", "processes": 1, "of_processes": 3, "factor": 3.25, "text": "drift: x"},
        {"kind": "timeout", "region": "", "processes": 1, "of_processes": 4, "text": "exceeded the cell time limit"},
        {"kind": "disturbed", "region": "", "processes": 2, "of_processes": 5, "left_out_round": 2, "replaced": True,
         "text": "disturbed: other processes used 0.90 cores"},
        {"kind": "bimodal", "region": "compute", "processes": 2, "of_processes": 5, "factor": 1.8, "left_out_round": 4,
         "replaced": True, "text": "bimodal samples"},
    ]
    flags = pd.DataFrame([{**key, **row} for row in rows])
    text = build_markdown(inputs({**gpu_tables, "timings": t, "flags": flags}))
    name = f"`{cell['op']}/{cell['library']}-{cell['device']}-{cell['dtype']}-n{cell['size']}-t{cell['threads']}`"
    assert (f"- {name}: drift: second half 12.0% slower than the first (in 2 of 3 processes); processes disagree: "
            "its two undisturbed processes differ by 1.50×; processes disagree: 1 of 3 processes disagree (its median "
            "lies 3.25× from the other processes' (drift: x)); 1 of 4 processes failed (timeout: exceeded the cell "
            "time limit)") in text
    assert (f"- 1 cell had a process left out, replaced by an extra one where there was one, never averaged in: "
            f"{name}: 2 of 5 processes replaced (round 2: disturbed: other processes used 0.90 cores, round 4: its "
            "median lies 1.80× from the other processes' (bimodal samples)).") in text


def test_an_ops_speedup_table_marks_a_weak_cell_as_its_sentences_do(gpu_tables):
    from offloadbench.report.text.markdown import op_speedups_table

    s = gpu_tables["speedups"]
    s = s[(s["op"] == s["op"].iloc[0]) & (s["device"] == "cpu")].assign(flagged=False, shares_cores=False)
    assert "†" not in op_speedups_table(s, Judging())
    flagged = s.index[0]
    lines = op_speedups_table(s.assign(flagged=s.index == flagged), Judging()).splitlines()
    marked = [line for line in lines if "†" in line]
    assert len(marked) == 1 and marked[0].count("†") == 1 and f"| {s.loc[flagged, 'variant']} |" in marked[0]


def test_the_machine_section_names_the_extra_libraries_installed_with_their_versions():
    from offloadbench.records import Environment
    from offloadbench.report.text.markdown import machine_section

    env = Environment.from_json({"numpy_version": "2.4.6", "torch_version": "2.13.0", "numpy": "2.4.6",
                                 "jax": "0.10.2", "cupy": None})
    (software,) = [line for line in machine_section(env, "m") if line.startswith("- Software")]
    assert software.endswith("PyTorch 2.13.0, JAX 0.10.2") and "CuPy" not in software
