"""The editor's `kernelscope.countersMatch`: a regular expression, or nothing (VS Code leaves
an emptied setting as ""), and anything else falls back to none with a message naming it."""

from __future__ import annotations

from kernelscope.app.settings import parse_settings


def test_a_pattern_an_emptied_one_and_a_bad_one() -> None:
    settings, problems = parse_settings({"countersMatch": "multi_tensor|Adam"})
    assert settings.counters_match == "multi_tensor|Adam" and not problems
    settings, problems = parse_settings({"countersMatch": ""})
    assert settings.counters_match is None and not problems
    for bad in ("(", 3):
        settings, problems = parse_settings({"countersMatch": bad})
        assert settings.counters_match is None
        assert len(problems) == 1 and "kernelscope.countersMatch" in problems[0]
