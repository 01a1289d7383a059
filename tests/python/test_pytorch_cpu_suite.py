"""tests/pytorch_suite/run_cpu_suite.py's verdict on made-up JUnit XML in pytest's format: a test
the base passes counts against umem unless it passes with umem too, whatever else differs."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "pytorch_suite"))
import run_cpu_suite  # noqa: E402


def junit(path, cases):
    """cases: {name: passed | failed | error | skipped}."""
    body = {"passed": "", "failed": "<failure message='x'/>", "error": "<error message='x'/>",
            "skipped": "<skipped message='x'/>"}
    with open(path, "w") as f:
        f.write("<testsuites><testsuite name='pytest'>" + "".join(
            f"<testcase classname='test_x.TestX' name='{n}'>{body[o]}</testcase>"
            for n, o in cases.items()) + "</testsuite></testsuites>")
    return run_cpu_suite.outcomes(path)


def test_outcomes_read_pytest_s_junit_xml(tmp_path):
    assert junit(tmp_path / "a.xml", {"a": "passed", "b": "failed", "c": "error", "d": "skipped"}) \
        == {"test_x.TestX::a": "passed", "test_x.TestX::b": "failed",
            "test_x.TestX::c": "failed", "test_x.TestX::d": "skipped"}


def test_a_test_the_base_passes_must_pass_with_umem(tmp_path, capsys):
    base = junit(tmp_path / "base.xml", {"a": "passed", "b": "passed", "c": "passed",
                                         "d": "failed"})
    umem = junit(tmp_path / "umem.xml", {"a": "passed", "b": "failed", "d": "passed"})
    lost = run_cpu_suite.report("test_x.py", base, umem)
    assert lost == ["test_x.TestX::b", "test_x.TestX::c"]  # failed, and not run at all
    out = capsys.readouterr().out
    assert "passing with umem, of those PyTorch's allocator passes: 1 of 3" in out
    assert "not with umem: test_x.TestX::c (not run)" in out
    assert "only with umem: test_x.TestX::d" in out


def test_equal_runs_lose_nothing(tmp_path):
    cases = {"a": "passed", "b": "skipped", "c": "failed"}
    assert run_cpu_suite.report("test_x.py", junit(tmp_path / "b.xml", cases),
                                junit(tmp_path / "u.xml", cases)) == []
