"""Section 9, CUPTI beside Nsight Compute: the child program the notebook builds, and the verdict on real frames."""

import subprocess
import sys

import evidence
import pandas as pd
import pytest
from fakes import build_fake_injection_library
from pytest import approx
from support import defined, parse, run_cells, verdicts

VERDICT = (
    "CUPTI's time over Nsight Compute's {}x at n=512, {}x at n=4096; the sweep took {} s under CUPTI, {} s under "
    "Nsight Compute"
)


def test_the_child_puts_the_cupti_folder_first_and_loads_its_libcupti_before_nsight_or_torch(tmp_path):
    if (built := build_fake_injection_library(tmp_path / "cupti13/nvidia/cu13/lib")) is None:
        pytest.skip("no C compiler here to build a stand-in libcupti.so.13")
    libcupti = built.rename(built.with_name("libcupti.so.13"))
    namespace = defined("s2-define", "add") | defined("s9-define", "square_matmul", "sweep")
    namespace |= {"cupti_dir": tmp_path / "cupti13", "libcupti": libcupti}
    run_cells(["s9-child"], namespace)
    program = namespace["child_program"]
    preload, _, rest = program.partition("import nsight\n")
    assert "nsight.activate(nsight.Tool.CUPTI)" in rest.split("import pandas")[0], "CUPTI before torch's import"
    assert all(f"def {name}(" in rest for name in ("add", "square_matmul", "sweep")), "the same sweep as the parent"
    check = preload + "import sys\nprint(sys.path[0])\nprint(open('/proc/self/maps').read())\n"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    first, maps = done.stdout.split("\n", 1)
    assert first == str(tmp_path / "cupti13") and str(libcupti) in maps, "the folder first, its libcupti loaded"


def test_the_verdict_gives_cuptis_time_over_nsight_computes_per_size_and_each_sides_wall_time():
    folder = evidence.run_with("s9_ncu")
    ncu = pd.concat(evidence.written(folder, "s9_ncu")).assign(wall_s=12.0)  # distinct walls: which side is which
    cupti = pd.read_csv(folder / "s9_cupti.csv").assign(wall_s=4.0)
    said = verdicts(run_cells(["s9-verdict"], {"ncu_frame": ncu, "cupti_frame": cupti, "gpu": evidence.gpu(folder)}))
    ratio = cupti.set_index("n").AvgValue / ncu.set_index("n").AvgValue
    assert parse(VERDICT, said) == [*(approx(r, abs=0.006) for r in ratio), 4.0, 12.0], said
