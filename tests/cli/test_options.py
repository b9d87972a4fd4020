"""corral.cli.options reads the quick commands' lines as click reads them: the same values, and for a line
click refuses, the same words and exit status. click itself is the reference, given the same declarations."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from corral.cli.jobs import COMMANDS, run
from corral.cli.main import QuickCommand
from corral.cli.options import HelpRequested, parse


def _click_reading(name: str, argv: list[str]) -> tuple[int, str, dict | None]:
    """(exit status, output, values) of a plain click command with the quick command's declarations."""
    seen: dict = {}
    spec = COMMANDS[name]
    reference = click.Command(name, params=QuickCommand(spec).params, callback=lambda **values: seen.update(values),
                              context_settings={"allow_interspersed_args": spec.interspersed,
                                                "help_option_names": ["-h", "--help"]})
    group = click.Group("corral", commands=[reference])
    result = CliRunner().invoke(group, [name, *argv], prog_name="corral")
    return result.exit_code, result.output, seen or None


GOOD = [
    ("submit", ["-J", "x", "-c2", "--gpus=1", "-Hp", "gpu", "--env", "A=1", "--env", "B=2", "--nice", "-5", "s.sh", "-c", "9"]),
    ("submit", ["--kill-on-invalid-dep", "yes", "--preemptible", "--json", "--wrap", "echo hi"]),
    ("submit", ["-t", "1:00", "-t", "2:00", "--cpus", "3", "--mem-per-gpu", "4G", "--", "x"]),
    ("submit", ["--image", "ubuntu:22.04", "--container-mounts=/d:/d:ro", "--no-container-mount-home",
                "--container-remap-root", "--container-workdir", "/w", "--container-env=A,B", "--wrap", "true"]),
    ("queue", ["-t", "running", "--state=pending", "--start"]),
    ("queue", ["-l", "--start", "--long"]),
    ("queue", []),
    ("show", ["12", "--json"]),
    ("cancel", ["1", "--json", "2", "3"]),
    ("logs", ["-fn", "5", "7", "--stderr"]),
    ("logs", ["--", "-7"]),
]

BAD = [
    ("submit", ["--bogus"]), ("submit", ["--job-nam", "x"]), ("submit", ["--gpus"]), ("submit", ["-Z"]),
    ("submit", ["-c", "x"]), ("submit", ["--kill-on-invalid-dep", "maybe"]), ("submit", ["--json=1"]),
    ("submit", ["--help=1"]), ("queue", ["extra"]), ("queue", ["a", "b"]), ("queue", ["-t"]), ("show", []),
    ("show", ["1", "2"]), ("show", ["--jsno", "1"]), ("cancel", []), ("logs", ["1", "-n", "x"]), ("logs", ["-q", "1"]),
]


@pytest.mark.parametrize(("name", "argv"), GOOD)
def test_the_same_values_as_click(name, argv):
    status, output, values = _click_reading(name, argv)
    assert status == 0, output
    ours, operands = parse(COMMANDS[name], argv)
    spec = COMMANDS[name]
    clicked = {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
    if spec.operand:
        given = clicked.pop(spec.operand)
        assert operands == (given if spec.many else [given])
    else:
        assert operands == []
    assert ours == clicked


@pytest.mark.parametrize(("name", "argv"), BAD)
def test_the_same_refusals_as_click(name, argv, capsys):
    status, output, _ = _click_reading(name, argv)
    ours = run(COMMANDS[name], argv, None, "http://127.0.0.1:1")
    assert (ours, capsys.readouterr().err) == (status, output)


@pytest.mark.parametrize("argv", [["-h"], ["--help"], ["-Hh"], ["--gpus", "1", "--help"]])
def test_help_among_the_options_is_left_to_click(argv):
    with pytest.raises(HelpRequested):
        parse(COMMANDS["submit"], argv)


def test_submits_container_options_become_the_requests_container_fields():
    from corral.cli.jobs import SUBMIT, Call, job_request

    argv = ["--container-image", "nvcr.io#nvidia/pytorch:24.01-py3", "--container-mounts", "/data:/data:ro",
            "--container-workdir=/workspace", "--container-env", "NCCL_DEBUG", "--no-container-mount-home",
            "--container-remap-root", "--", "python", "train.py"]
    body = job_request(Call(SUBMIT, argv, None, "http://127.0.0.1:1"))
    assert {k: body[k] for k in body if k == "image" or k.startswith("container_")} == {
        "image": "nvcr.io#nvidia/pytorch:24.01-py3", "container_mounts": "/data:/data:ro",
        "container_workdir": "/workspace", "container_env": "NCCL_DEBUG", "container_mount_home": False,
        "container_remap_root": True}
    plain = job_request(Call(SUBMIT, ["--", "true"], None, "http://127.0.0.1:1"))
    assert not [k for k in plain if k == "image" or k.startswith("container_")]
