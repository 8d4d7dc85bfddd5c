"""What the MCP server returns, without a server: every recorded GPU fixture's report and
trace analysis validate against the published output schemas, and the agents' summaries
lead with the verdict and put findings at file:line, most severe first (the server itself
is tests/integration/test_mcp.py)."""

from __future__ import annotations

from typing import Any

import jsonschema
import msgspec
import pytest

from kernelscope.agents.schemas import output_schema
from kernelscope.analysis.experiments import judge
from kernelscope.app.scale import ScaleResult
from kernelscope.app.store import RunRecord
from kernelscope.app.traces import analyze_path
from kernelscope.findings import Finding, Severity
from kernelscope.protocol import TryFinished, VariantOutcome
from kernelscope.render.summary import (
    TOP_FINDINGS,
    comparison_summary,
    experiments_summary,
    findings_lines,
    report_summary,
)
from kernelscope.report.compare import Comparison, compare
from kernelscope.report.schema import Report, TraceAnalysis

from support import FIXTURES

RECORDED = sorted(p.parent.name for p in FIXTURES.glob("*/report.json"))


def as_json(value: object) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))


def fixture_report(name: str) -> Report:
    return msgspec.json.decode((FIXTURES / name / "report.json").read_bytes(), type=Report)


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_reports_and_analyses_fit_the_schemas(name: str) -> None:
    schema = output_schema(Report, TraceAnalysis)
    jsonschema.Draft202012Validator.check_schema(schema)
    report = fixture_report(name)
    jsonschema.validate(as_json(report), schema)
    jsonschema.validate(as_json(report), output_schema(Report))
    trace = FIXTURES / name / "trace.json.gz"
    jsonschema.validate(as_json(analyze_path(trace, trace_only=True)), schema)
    record = RunRecord("r1", report.function.path, report.function.qualname, "now", "", report)
    jsonschema.validate(as_json(record), output_schema(RunRecord))
    jsonschema.validate(as_json(compare(report, report)), output_schema(Comparison))


def test_a_schema_is_rooted_at_an_object_with_its_definitions() -> None:
    schema = output_schema(ScaleResult)
    assert schema["type"] == "object" and "$ref" not in schema
    assert set(schema["required"]) == {"function", "device", "points", "verdict", "png"}
    assert "ScaleVerdict" in schema["$defs"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"function": {}}, schema)


def test_a_report_summary_leads_with_the_verdict() -> None:
    report = analyze_path(FIXTURES / "matmul_add_8192" / "trace.json.gz")  # with its sidecar
    assert isinstance(report, Report) and report.verdict is not None
    lines = report_summary(report).splitlines()
    assert lines[0] == f"verdict: {report.verdict.summary}"
    assert lines[1].startswith("matmul_add (") and "matmul_add.py:10)" in lines[1]
    assert lines[1].endswith(f"on {report.device.name}")
    assert lines[3].startswith("top ops: aten::mm ")
    shown = [ln for ln in lines if ln.startswith("- KS")]
    assert shown and all(".py:" in ln for ln in shown)


def test_findings_most_severe_first_and_bounded() -> None:
    findings = [
        Finding("KS201", Severity.HINT, "cold", "m.py", 3),
        *[Finding("KS110", Severity.INFO, f"line {i}", "m.py", 10 + i) for i in range(6)],
        Finding("KS301", Severity.WARNING, "sync", "m.py", 7, try_=["drop .item()"]),
        Finding("KS102", Severity.WARNING, "memory-bound", "m.py", 1, try_=["fuse", "bf16"]),
    ]
    lines = findings_lines(findings)
    assert lines[0] == "try: fuse; bf16"  # the verdict's advice, not listed again
    assert lines[1] == "- KS301 m.py:7: sync (try: drop .item())"
    assert len([ln for ln in lines if ln.startswith("- ")]) == TOP_FINDINGS
    assert lines[-1] == f"… {8 - TOP_FINDINGS} more findings in the structured result"
    assert not any("KS201" in ln for ln in lines)  # the hint is the least severe


def test_experiments_and_diff_summaries() -> None:
    finished = TryFinished(
        job_id="j", device_type="cuda", device_name="NVIDIA H200", method="cuda_events",
        baseline_rounds_us=[100.0] * 8,
        variants=[
            VariantOutcome(name="compile", status="ok", rounds_us=[50.0, 52.0] * 4,
                           results="equal", one_time_s=2.1, one_time_what="compile"),
            VariantOutcome(name="graphs", status="failed", why="RuntimeError: boom", line=7),
        ],
    )  # fmt: skip
    e = judge(finished, "m.py", "f", 3)
    lines = experiments_summary(e).splitlines()
    assert lines[0].startswith("best: torch.compile: 1.96× faster")
    assert lines[2].startswith("- torch.compile: ×1.96 (") and lines[2].endswith("results equal")
    assert lines[3] == "- CUDA Graphs: failed at m.py:7: RuntimeError: boom"

    before, after = fixture_report("matmul_add_1024"), fixture_report("matmul_add_8192")
    c = compare(before, after, "run a", "run b")
    lines = comparison_summary(c).splitlines()
    assert lines[0].startswith("change: +") and "regression" in lines[0]
    assert lines[1] == "run a → run b"
    assert lines[2].startswith(f"moved most: {c.ops[0].name} ")
