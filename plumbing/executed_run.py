"""Each section's status from a headless run's executed notebook (errors allowed, so every cell ran), merged into
the summary.json it wrote: an error output marks its section FAILED with the section's first error."""

import json
from pathlib import Path

from plumbing.cells import SECTION_COUNT, section_of

STATUSES = ("ok", "SKIPPED", "FAILED", "NOT RUN")


def section_or_none(cell_id):
    """The section plumbing/cells.py gives a cell id; None outside the sections, or for an id it does not know."""
    try:
        return section_of(cell_id)
    except KeyError:  # a cell the table does not know: reported outside the sections, never dropped
        return None


def first_errors(notebook):
    """{section number, or None outside the sections: its first {"cell": id, "error": "ename: evalue's line 1"}}."""
    found = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if output.get("output_type") == "error":
                first_line = (str(output.get("evalue", "")).strip().splitlines() or [""])[0]
                error = {"cell": cell.get("id"), "error": f"{output.get('ename', '?')}: {first_line}"[:300]}
                found.setdefault(section_or_none(cell.get("id")), error)
                break
    return found


def _unwritten_summary():
    """What the run tells when the notebook wrote no summary.json (it never reached its summary cell)."""
    not_run = {"status": "NOT RUN", "reason": "no summary.json: the notebook stopped before its end",
               "environment_limit": False, "headline": "", "seconds": None}  # fmt: skip
    sections = [{"number": number, **not_run} for number in range(1, SECTION_COUNT + 1)]
    return {"environment": {}, "sections": sections, "figures": [], "summary_written": False}


def merge_failures(summary, notebook):
    """summary (None when none was written) with each section that raised FAILED, errors outside the sections listed
    under "errors_outside_sections", and the counts made again."""
    merged = json.loads(json.dumps(summary)) if summary else _unwritten_summary()
    errors = first_errors(notebook)
    by_number = {section["number"]: section for section in merged["sections"]}
    for number, error in errors.items():
        if number is not None:
            reason = f"{error['error']} (cell {error['cell']})"
            by_number[number].update(status="FAILED", reason=reason, environment_limit=False)
    merged["errors_outside_sections"] = [errors[None]] if None in errors else []
    statuses = [section["status"] for section in merged["sections"]]
    merged["counts"] = {status: statuses.count(status) for status in STATUSES}
    merged["suspect_figures"] = sum(figure.get("check") == "SUSPECT" for figure in merged.get("figures", []))
    return merged


def run_problems(summary):
    """What fails a headless run: a FAILED or NOT RUN section, a SUSPECT figure, an error outside the sections."""
    problems = [f"section {s['number']} {s['status']}: {s['reason']}" for s in summary["sections"]
                if s["status"] in ("FAILED", "NOT RUN")]  # fmt: skip
    suspect = [f for f in summary["figures"] if f["check"] == "SUSPECT"]
    problems += [f"SUSPECT figure in section {f['section']}: {f['name']} = {f['value']} {f['unit']} "
                 f"({f['pct_of_peak']}% of peak {f['peak']})" for f in suspect]  # fmt: skip
    return problems + [f"cell {e['cell']}: {e['error']}" for e in summary.get("errors_outside_sections", [])]


def finish_run(executed_path, summary_path):
    """Read the executed notebook, merge its errors into summary.json (rewritten in place), return the summary."""
    notebook = json.loads(Path(executed_path).read_text())
    summary_path = Path(summary_path)
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    merged = merge_failures(summary, notebook)
    summary_path.write_text(json.dumps(merged, indent=2, default=str) + "\n")
    return merged
