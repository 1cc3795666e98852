"""Section 2, a first profiled call: the summed row and the refusal without a rule, against the recorded call."""

import json

import cupti_evidence
import recordings
from pytest import approx
from support import parse

VERDICT = "{} kernels ran {} TFLOP/s together"
REFUSAL = "without a rule nsight said: {}"
REMEDIES = ("replay_mode='range'", "combine_kernel_metrics", "ignore_kernel_list")


def refused_call(recorded) -> dict:
    """The profiled call of the region without combine_kernel_metrics, as the GPU machine recorded it."""
    calls = [call for call in recorded.recording["calls"] if call["section"] == 2 and call.get("error")]
    assert len(calls) == 1, f"section 2 should have exactly one refused call: {[c['index'] for c in calls]}"
    return calls[0]


def test_section_2s_verdict_counts_the_summed_kernels_and_rates_the_region_at_2_n_cubed_flops(recorded):
    row = recorded.bound(2)["first_frame"].iloc[0]
    assert (row.n, row.Unit, row.NumRuns) == (4096, "ns", 1), f"the recorded row changed: {row.to_dict()}"
    kernels = row.Kernel.split("|")  # nsight joins a combined region's kernel names with |
    tflops = 2 * 4096**3 / (row.AvgValue * 1e-9) / 1e12
    assert recorded.shown(2, VERDICT) == [len(kernels), approx(tflops, abs=0.06)], "count the kernels, n^3 in ns"
    assert len(kernels) == 2 and "gemm" in kernels[0], f"relu(a @ b) should be a product and a ReLU: {kernels}"
    recorded.check_figure(2, "fp32 product + ReLU, n=4096", tflops, "TFLOP/s", "fp32_tflops")


def test_section_2_prints_nsights_whole_refusal_and_its_verdict_quotes_the_first_line(recorded):
    message = refused_call(recorded)["error"]["message"]  # what nsight raised on the GPU machine
    assert recorded.bound(2)["refusal"] == message, "s2-error must keep nsight's message whole"
    assert all(remedy in message for remedy in REMEDIES), f"nsight's message no longer offers the three: {message}"
    assert recorded.shown(2, REFUSAL) == [message.splitlines()[0]], "the verdict quotes the refusal's first line"
    printed = recorded.recording["cells"]["s2-error"]["output"]
    assert printed.strip() == message.strip(), "the learner must see the whole message, remedies and kernels"


def test_on_the_cupti_run_section_2s_verdict_counts_the_kernels_and_rates_the_raw_time():
    (frame,), (raw,) = (
        cupti_evidence.written("s2_summed", "processed_data"),
        cupti_evidence.written("s2_summed", "profiled_data"),
    )
    said, figures = cupti_evidence.findings(2, {"first_frame": frame}, upto="s2-verdict")
    (time_ns,) = raw.Value  # one run, the summed kernels
    tflops = 2 * 4096**3 / (time_ns * 1e-9) / 1e12
    assert parse(VERDICT, said) == [len(raw.Kernel[0].split("|")), approx(tflops, abs=0.06)], said
    assert figures == [(2, "fp32 product + ReLU, n=4096", approx(tflops), "TFLOP/s", "fp32_tflops")]


def test_on_the_cupti_run_the_learner_saw_nsights_whole_refusal_with_its_three_remedies():
    page = json.loads((cupti_evidence.CUPTI_RUN / "nsight_python_t4_tutorial.ipynb").read_text())
    (cell,) = [cell for cell in page["cells"] if cell.get("id") == "s2-error"]
    printed = "".join(text for output in cell["outputs"] for text in output.get("text", ""))
    assert printed.startswith("More than one (total=2) kernel") and "Kernels are:" in printed, printed
    assert all(remedy in printed for remedy in REMEDIES), f"the CUPTI backend's refusal lost a remedy: {printed}"


def test_section_2s_error_cell_keeps_and_prints_the_whole_message_of_the_refusal_it_catches(capsys):
    message = "More than one (total=2) kernel is launched within the relu(a @ b) annotation.\nKernels are:\nk1\nk2"

    def relu_of_product_strict(n):  # stands in for the profiled call: it raises what nsight raises
        raise RuntimeError(message)

    namespace = {"relu_of_product_strict": relu_of_product_strict}
    exec(recordings.cell_source(recordings.load_cells(), "s2-error"), namespace)
    assert namespace["refusal"] == message and capsys.readouterr().out == message + "\n", "keep and print it whole"
