"""--log-format json: every line a collector reads is one JSON object with the usual fields."""

from __future__ import annotations

import json
import logging

import pytest

from reconciler.cli import main
from reconciler.logs import QUIET_LIBRARIES, configure_logging, print_warnings


@pytest.fixture(autouse=True)
def _restore_root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    libraries = {name: logging.getLogger(name).level for name in QUIET_LIBRARIES}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, was in libraries.items():
        logging.getLogger(name).setLevel(was)


def test_json_lines_carry_time_level_logger_and_message(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", logging.INFO)
    logging.getLogger("reconciler.daemon").info("applied %s", "abc123", extra={"revision": "abc"})
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("reconciler.scheduler").exception("bind failed")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert lines[0]["message"] == "applied abc123"
    assert lines[0]["level"] == "INFO" and lines[0]["logger"] == "reconciler.daemon"
    assert lines[0]["revision"] == "abc" and "T" in lines[0]["time"]
    assert lines[1]["level"] == "ERROR" and "ValueError: boom" in lines[1]["exc_info"]


def test_text_is_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("text", logging.INFO)
    logging.getLogger("reconciler").info("hello")
    assert capsys.readouterr().err.rstrip().endswith("INFO reconciler: hello")


def test_a_daemon_that_cannot_start_says_why_in_json(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    missing = tmp_path / "no-kubeconfig"
    status = main(["run", "--log-format", "json", "--source-dir", str(tmp_path),
                   "--kubeconfig", str(missing)])  # fmt: skip
    assert status == 1
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["level"] == "ERROR" and str(missing) in record["message"]


def test_compile_warnings_are_json_lines_too(capsys: pytest.CaptureFixture[str]) -> None:
    """The daemon compiles each revision: its warnings once broke the JSON stream (a
    collector met `values.yaml:90 (...): warning: ...` as a bare line)."""
    configure_logging("json", logging.INFO)
    print_warnings(["values.yaml:90 (compute.nodes.x): warning: makes no nodes"])
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["level"] == "WARNING" and record["message"].endswith("makes no nodes")
    configure_logging("text", logging.INFO)  # for whoever runs a command: the plain line
    print_warnings(["a warning"])
    assert capsys.readouterr().err == "a warning\n"


def test_library_bookkeeping_is_quiet_unless_debug_is_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """apscheduler logs two INFO lines at every run of every timer: 5,760 lines a day from an
    idle daemon. At INFO they are dropped, their warnings kept; RECONCILER_DEBUG shows all."""
    running = 'Running job "Daemon._fetch_and_converge"'
    configure_logging("text", logging.INFO)
    logging.getLogger("apscheduler.executors.default").info(running)
    logging.getLogger("urllib3.connectionpool").info("Resetting dropped connection")
    logging.getLogger("apscheduler.scheduler").warning("job missed by 2 s")
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("WARNING apscheduler.scheduler: job missed by 2 s")
    monkeypatch.setenv("RECONCILER_DEBUG", "1")
    with pytest.raises(SystemExit):
        main(["run", "--help"])  # logging is configured before the arguments are read
    capsys.readouterr()
    logging.getLogger("apscheduler.executors.default").info(running)
    assert running in capsys.readouterr().err


def test_a_resync_does_not_print_the_same_compile_warnings_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The daemon compiles its revision at each resync; the same warnings each time would be
    the only lines of an idle daemon. A new warning, or one back after a compile without
    it, is printed."""
    configure_logging("text", logging.INFO)
    print_warnings(["makes no nodes"])
    print_warnings(["makes no nodes"])
    print_warnings(["makes no nodes", "another"])
    print_warnings([])
    print_warnings(["makes no nodes"])
    assert capsys.readouterr().err == "makes no nodes\nanother\nmakes no nodes\n"
