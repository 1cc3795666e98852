"""Each section's status and verdict from a headless run's executed notebook, merged into its summary.json: ok once
it printed a verdict, FAILED at its first error, SKIPPED when it only said it needs Nsight Compute, else NOT RUN; each
code cell's time and the outputs of each that failed. No torch or nsight: the run is judged after the kernel is gone."""

import json
import re
from datetime import datetime
from pathlib import Path

from plumbing.cells import NCU_ONLY_SECTIONS, SECTION_COUNT, section_of

STATUSES = ("ok", "SKIPPED", "FAILED", "NOT RUN")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # IPython colours its tracebacks; a log and summary.json want the text
VERDICT = "On this "  # how every section's verdict line starts
SKIPPED = "Skipped: this cell needs Nsight Compute"  # what %%needs_ncu prints instead of running a cell
OUTPUT_LIMIT = 4000  # characters of a failing cell's outputs kept, from the end: where its traceback says what raised


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


def _moment(text):
    """A timestamp as nbclient records it ("2026-12-02T03:56:38.142871Z"); None when absent or unreadable."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def cell_status(cell):
    """Its end: "not run" (after a timeout), "unfinished" (past the timeout, or the kernel died), "error" or "ok"."""
    timing = cell.get("metadata", {}).get("execution", {})
    if "iopub.execute_input" not in timing:
        return "not run"
    if "shell.execute_reply" not in timing:  # a timed-out cell also holds the KeyboardInterrupt of the kernel's end
        return "unfinished"
    return "error" if any(output.get("output_type") == "error" for output in cell.get("outputs", [])) else "ok"


def cell_seconds(cell):
    """How long a code cell ran, from the times nbmake's client recorded; None if it did not finish."""
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = _moment(timing.get("iopub.execute_input")), _moment(timing.get("shell.execute_reply"))
    return round((end - start).total_seconds(), 3) if start and end else None


def cell_times(notebook):
    """[{"cell", "section", "seconds", "status"}] for every code cell, in notebook order."""
    code = [cell for cell in notebook.get("cells", []) if cell.get("cell_type") == "code"]
    return [
        dict(cell=c.get("id"), section=section_or_none(c.get("id")), seconds=cell_seconds(c), status=cell_status(c))
        for c in code
    ]


def output_text(output):
    """An output as a reader of a log sees it: printed text, a result's text, an error's traceback without colours."""
    kind = output.get("output_type")
    if kind == "stream":
        text = output.get("text", "")
    elif kind == "error":
        text = "\n".join(output.get("traceback") or [f"{output.get('ename', '?')}: {output.get('evalue', '')}"])
    else:  # execute_result, display_data: the plain text, or what kind of picture it was
        data = output.get("data", {})
        text = data.get("text/plain") or " ".join(f"[{kind_of}]" for kind_of in data)
    text = "".join(text) if isinstance(text, list) else str(text)
    return ANSI.sub("", text).rstrip("\n") + "\n"


def failing_cells(notebook):
    """Each code cell that raised or never finished, with the last OUTPUT_LIMIT characters of its outputs."""
    failing = []
    code = [cell for cell in notebook.get("cells", []) if cell.get("cell_type") == "code"]
    for cell, timed in zip(code, cell_times(notebook), strict=True):
        if timed["status"] in ("error", "unfinished"):
            outputs = "".join(output_text(output) for output in cell.get("outputs", []))
            cut = len(outputs) - OUTPUT_LIMIT
            outputs = f"[{cut} characters before this left out]\n{outputs[cut:]}" if cut > 0 else outputs
            failing.append({**timed, "outputs": outputs})
    return failing


def run_report(summary):
    """Where a run failed, for pytest's output: each code cell's time, then the outputs of each failing cell."""
    lines = ["each code cell's time (summary.json: cells):"]
    for cell in summary.get("cells", []):
        seconds = "-" if cell["seconds"] is None else f"{cell['seconds']:.2f} s"
        section = "-" if cell["section"] is None else cell["section"]
        lines.append(f"  {cell['cell']!s:<28} section {section!s:>2} {seconds:>10}  {cell['status']}")
    for cell in summary.get("failing_cells", []):
        lines.append(f"---- outputs of cell {cell['cell']} (section {cell['section']}, {cell['status']}):")
        lines.append(cell["outputs"].rstrip("\n") or "(no output)")
    return "\n".join(lines)


def printed_lines(cell):
    """The lines a code cell printed (its stdout), colours removed (output_text removes them)."""
    return "".join(output_text(o) for o in cell.get("outputs", []) if o.get("output_type") == "stream").splitlines()


def section_entries(notebook):
    """Each section's status, reason, time and headline (its verdict lines, joined) from the executed notebook."""
    cells = {number: [] for number in range(1, SECTION_COUNT + 1)}
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code" and (number := section_or_none(cell.get("id"))) is not None:
            cells[number].append(cell)
    errors, entries = first_errors(notebook), []
    for number, code in cells.items():
        lines = [line for cell in code for line in printed_lines(cell)]
        verdicts = [line for line in lines if line.startswith(VERDICT)]
        entry = dict(number=number, status="ok", reason="", headline="; ".join(verdicts))
        entry["seconds"] = round(sum(cell_seconds(cell) or 0 for cell in code), 2)
        if number in errors:
            entry.update(status="FAILED", reason=f"{errors[number]['error']} (cell {errors[number]['cell']})")
        elif not verdicts and number in NCU_ONLY_SECTIONS and any(line.startswith(SKIPPED) for line in lines):
            entry.update(status="SKIPPED", reason="needs Nsight Compute; the run measured with CUPTI")
        elif not verdicts:
            entry.update(status="NOT RUN", reason="it printed no verdict", seconds=None)
        entries.append(entry)
    return entries


def merge_failures(summary, notebook):
    """summary (None if none was written) with the notebook's sections, cells, errors outside sections and counts."""
    merged = json.loads(json.dumps(summary)) if summary else {"environment": {}, "figures": []}
    merged["summary_written"] = summary is not None
    files = {section["number"]: section.get("files", []) for section in merged.get("sections", [])}
    merged["sections"] = [entry | {"files": files.get(entry["number"], [])} for entry in section_entries(notebook)]
    errors = first_errors(notebook)
    merged["errors_outside_sections"] = [errors[None]] if None in errors else []
    merged["cells"], merged["failing_cells"] = cell_times(notebook), failing_cells(notebook)
    statuses = [section["status"] for section in merged["sections"]]
    merged["counts"] = {status: statuses.count(status) for status in STATUSES}
    merged["total_seconds"] = round(sum(section["seconds"] or 0 for section in merged["sections"]), 1)
    merged["suspect_figures"] = sum(figure.get("check") == "SUSPECT" for figure in merged.get("figures", []))
    return merged


def run_problems(summary):
    """What fails a headless run: a FAILED or NOT RUN section, a SUSPECT figure, an error outside the sections."""
    problems = [
        f"section {s['number']} {s['status']}: {s['reason']}"
        for s in summary["sections"]
        if s["status"] in ("FAILED", "NOT RUN")
    ]
    suspect = [f for f in summary["figures"] if f["check"] == "SUSPECT"]
    problems += [
        f"SUSPECT figure in section {f['section']}: {f['name']} = {f['value']} {f['unit']} "
        f"({f['pct_of_peak']}% of peak {f['peak']})"
        for f in suspect
    ]
    return problems + [f"cell {e['cell']}: {e['error']}" for e in summary.get("errors_outside_sections", [])]


def finish_run(executed_path, summary_path):
    """Read the executed notebook, merge its errors into summary.json (rewritten in place), return the summary."""
    notebook = json.loads(Path(executed_path).read_text())
    summary_path = Path(summary_path)
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    merged = merge_failures(summary, notebook)
    summary_path.write_text(json.dumps(merged, indent=2, default=str) + "\n")
    return merged
