"""`reconciler run` settings: flags > environment > config file > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cli import _subcommand, build_parser
from reconciler.cli.settings import layered_defaults
from reconciler.errors import ReconcilerError


def parse(argv: list[str], environ: dict[str, str]) -> object:
    parser = build_parser()
    run = _subcommand(parser, "run")
    run.set_defaults(**layered_defaults(run, argv, environ))
    return parser.parse_args(argv)


def test_flags_beat_environment_beat_file(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(
        "git-url: https://file/repo.git\ninterval: 7\nresync: 70\nleader-elect: true\n"
    )
    environ = {"RECONCILER_INTERVAL": "8"}
    args = parse(["run", "--config", str(config), "--resync", "9"], environ)
    assert args.git_url == "https://file/repo.git"  # type: ignore[attr-defined]
    assert args.interval == 8.0  # type: ignore[attr-defined]
    assert args.resync == 9.0  # type: ignore[attr-defined]
    assert args.leader_elect is True  # type: ignore[attr-defined]


def test_defaults_stay_without_any_source() -> None:
    args = parse(["run"], {})
    assert (args.interval, args.git_branch, args.leader_elect) == (30.0, "main", False)  # type: ignore[attr-defined]


def test_the_config_file_can_be_named_by_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("git-branch: release\n")
    args = parse(["run"], {"RECONCILER_CONFIG": str(config)})
    assert args.git_branch == "release"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("gti-url: x\n", "unknown settings gti-url"),
        ("interval: soon\n", "--interval: invalid value"),
        ("leader-elect: maybe\n", "expected true or false"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_config_file_mistakes_are_named(tmp_path: Path, text: str, error: str) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(text)
    with pytest.raises(ReconcilerError, match=error):
        parse(["run", "--config", str(config)], {})


def test_a_value_its_flag_refuses_is_named_from_the_environment_and_the_file(
    tmp_path: Path,
) -> None:
    """A type that says why (argparse.ArgumentTypeError) failed with a traceback when the
    value came from the environment or the config file instead of the command line."""
    environ = {"RECONCILER_SLURM_METRICS_JOB_DETAIL_LIMIT": "-3"}
    said = "job-detail-limit: invalid value '-3': -3 is below 0"
    with pytest.raises(ReconcilerError, match=said):
        parse(["run"], environ)
    config = tmp_path / "run.yaml"
    config.write_text("slurm-metrics-job-detail-limit: -3\n")
    with pytest.raises(ReconcilerError, match="-3 is below 0"):
        parse(["run", "--config", str(config)], {})
    args = parse(["run"], {"RECONCILER_SLURM_METRICS_JOB_DETAIL_LIMIT": "5"})
    assert args.slurm_metrics_job_detail_limit == 5  # type: ignore[attr-defined]
