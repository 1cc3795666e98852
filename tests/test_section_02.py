"""Section 2, a first profiled call: today's verdict cell on the frame a real run left, and the refusal."""

import evidence
import pytest
from pytest import approx
from support import parse, run_cells, verdicts

REMEDIES = ("replay_mode='range'", "combine_kernel_metrics", "ignore_kernel_list")


def test_the_verdict_counts_the_regions_kernels_and_rates_them_at_2_n_cubed_flops_over_the_raw_time():
    folder = evidence.run_with("s2_summed")
    (frame,), (raw,) = evidence.written(folder, "s2_summed"), evidence.written(folder, "s2_summed", "profiled_data")
    printed = run_cells(["s2-verdict"], {"first_frame": frame, "gpu": evidence.gpu(folder)})
    (time_ns,) = raw.Value  # one run: the product and the ReLU, summed
    kernels, tflops = parse("{} kernels ran {} TFLOP/s together", verdicts(printed))
    assert printed.startswith(f"On this {evidence.gpu(folder)}: "), printed
    assert kernels == len(raw.Kernel[0].split("|")) == 2, f"relu(a @ b) is a product and a ReLU: {raw.Kernel[0]}"
    assert tflops == approx(2 * 4096**3 / (time_ns * 1e-9) / 1e12, abs=0.06), "2 n^3 FLOPs over the time in ns"


def test_the_learner_saw_nsights_whole_refusal_with_its_three_remedies_on_the_run():
    printed = evidence.printed(evidence.run_with("s2_summed"), "s2-error")
    assert "More than one (total=2) kernel" in printed.splitlines()[0] and "Kernels are:" in printed, printed
    assert all(remedy in printed for remedy in REMEDIES), f"nsight's refusal lost a remedy: {printed}"


@pytest.mark.parametrize("raises", [True, False])
def test_the_error_cell_prints_the_whole_refusal_it_catches_and_the_verdict_quotes_its_first_line(raises):
    message = "More than one (total=2) kernel is launched within the relu(a @ b) annotation.\nKernels are:\nk1\nk2"

    def relu_of_product_strict(n):  # stands in for the profiled call: it raises what nsight raises, or not
        if raises:
            raise RuntimeError(message)

    namespace = {"relu_of_product_strict": relu_of_product_strict, "gpu": "Tesla T4"}
    printed = run_cells(["s2-error", "s2-strict-verdict"], namespace)
    said = f"nsight raised: {message}" if raises else "no error: the region launched a single kernel"
    assert printed == f"{said}\nOn this Tesla T4: without a rule, {said.splitlines()[0]}\n", printed
