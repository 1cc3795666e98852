"""Section 7, fusion in bytes: today's table and verdict cells on a real Nsight Compute run's frame."""

import evidence
import pandas as pd
from pytest import approx
from support import parse, run_cells, verdicts

VERDICT = "the unfused pair moved {}x addcmul's bytes and took {}x its time"
TRAFFIC = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"]


def fused(frame, gpu="Tesla T4"):
    namespace = {"pd": pd, "gpu": gpu, "TRAFFIC": TRAFFIC, "fusion_frame": frame}
    return verdicts(run_cells(["s7-table", "s7-verdict"], namespace)), namespace


def test_the_verdict_gives_the_pairs_bytes_and_time_over_addcmuls_from_the_summed_kernels():
    folder = evidence.run_with("s7_fusion")
    (frame,) = evidence.written(folder, "s7_fusion")
    said, namespace = fused(frame, evidence.gpu(folder))
    value = frame.set_index(["Annotation", "Metric"]).AvgValue
    moved = {name: value[name, TRAFFIC[1]] + value[name, TRAFFIC[2]] for name in ("a + b * c", "addcmul")}
    took = {name: value[name, TRAFFIC[0]] for name in moved}
    assert parse(VERDICT, said) == [
        approx(moved["a + b * c"] / moved["addcmul"], abs=0.006),
        approx(took["a + b * c"] / took["addcmul"], abs=0.006),
    ], said
    row = [took["addcmul"], value["addcmul", TRAFFIC[1]], value["addcmul", TRAFFIC[2]], moved["addcmul"]]  # ns, bytes
    assert namespace["traffic"].loc["addcmul"].tolist() == approx([figure / 1e6 for figure in row]), "ms and MB"
    assert frame[frame.Annotation == "a + b * c"].Kernel.iloc[0].count("|") == 1, "the pair is two kernels, summed"
