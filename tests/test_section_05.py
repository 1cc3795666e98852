"""Section 5, rates across sizes: today's table and verdict cells on the frames a real run left."""

import evidence
import pandas as pd
from pytest import approx
from support import parse, run_cells, verdicts

VERDICT = "float16's speed over float32's {} with size: {}x at n=512, {}x at n=2048, {}x at n=8192"


def sweep(frames, gpu="Tesla T4"):
    namespace = {"sweep_frame": pd.concat(frames), "gpu": gpu}
    return verdicts(run_cells(["s5-table", "s5-verdict"], namespace)), namespace


def test_the_verdict_gives_float16s_tflops_over_float32s_from_the_raw_runs_of_each_size():
    folder = evidence.run_with("s5_sweep")
    raw = pd.concat(evidence.written(folder, "s5_sweep", "profiled_data"))
    rates = raw[raw.Metric == "matmul_tflops"].groupby(["n", "Annotation"]).Value.mean().unstack()
    lead = rates.float16 / rates.float32
    said, namespace = sweep(evidence.written(folder, "s5_sweep"), evidence.gpu(folder))
    grew, *shown = parse(VERDICT, said)
    assert shown == [approx(value, abs=0.051) for value in lead], f"float16 over float32 TFLOP/s at each n: {said}"
    assert grew == ("grew" if (lead.diff().dropna() > 0).all() else "did not grow"), said
    table = namespace["float16"]  # the normalized row keeps float16's own spread and unit
    float16_runs = raw[(raw.Metric == "matmul_tflops") & (raw.Annotation == "float16")].groupby("n").Value
    assert set(table.Unit) == {"TFLOP/s"}, "normalizing leaves the unit as it was"
    assert table.NormalizationValue.tolist() == approx(rates.float32.tolist()), "the divisor: float32's TFLOP/s"
    assert table.StdDev.tolist() == approx(float16_runs.std().tolist()), "StdDev stays float16's own, undivided"


def test_the_verdict_says_when_the_lead_did_not_grow_with_size():
    frames = evidence.written(evidence.run_with("s5_sweep"), "s5_sweep")
    last = frames[-1]
    last.loc[(last.Annotation == "float16") & (last.Metric == "matmul_tflops"), "AvgValue"] = 0.5
    said, _ = sweep(frames)
    assert parse(VERDICT, said)[0] == "did not grow", said
