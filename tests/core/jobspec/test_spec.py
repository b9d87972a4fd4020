"""build_spec: every way of asking for a job ends in one validated, frozen JobSpec."""

from __future__ import annotations

import dataclasses
import os

import pytest

from corral.core.jobspec.request import Request
from corral.core.jobspec.spec import MINIMAL_ENV_KEYS, JobSpec, build_spec
from corral.errors import InvalidRequest

SERVER_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/server", "USER": "server", "CUDA_HOME": "/opt/cuda"}
SNAPSHOT = {
    "PATH": "/home/alice/.venv/bin:/usr/bin", "HOME": "/home/alice", "USER": "alice", "LANG": "C.UTF-8",
    "WANDB_API_KEY": "secret", "FOO": "from-shell", "PYTHONPATH": "/home/alice/lib",
}


@pytest.fixture
def workdir(tmp_path) -> str:
    return str(tmp_path)


@pytest.fixture
def build(workdir):
    def build(request: dict, **overrides) -> JobSpec:
        # the directory check is the caller's I/O (the service passes it): here, this process looks
        kwargs = dict(user="alice", log_dir="/var/log/corral", default_workdir=workdir, server_env=SERVER_ENV,
                      can_enter=os.path.isdir)
        kwargs.update(overrides)
        return build_spec(request, **kwargs)

    return build


def invalid(build, request: dict, field: str) -> InvalidRequest:
    """The InvalidRequest build raises for request; asserts it names field."""
    with pytest.raises(InvalidRequest) as err:
        build(request)
    assert err.value.field == field, str(err.value)
    assert str(err.value).startswith(f"{field}:")
    return err.value


def cmd(**fields) -> dict:
    return {"command": ["python", "train.py"], **fields}


def sbatch(*lines: str) -> str:
    return "\n".join(["#!/bin/bash", *lines, "python train.py", ""])


# -- command or script --------------------------------------------------------------------------


def test_command_only_gives_a_spec_with_defaults(build, workdir):
    spec = build(cmd())
    assert spec.command == ("python", "train.py")
    assert spec.script is None
    assert spec.script_args == ()
    assert spec.user == "alice"
    assert (spec.gpus, spec.gpu_type, spec.gpu_mem_mb) == (0, None, None)
    assert spec.cpus == 1
    assert spec.mem_mb == 0
    assert spec.time_limit_s is None
    assert spec.nice == 0
    assert spec.workdir == workdir
    assert spec.labels == {}
    assert spec.warnings == ()


def test_default_logs_go_to_the_log_dir_by_job_id(build):
    spec = build(cmd())
    assert spec.stdout == os.path.join("/var/log/corral", "%j.out")
    assert spec.stderr == os.path.join("/var/log/corral", "%j.err")


def test_stdout_alone_sends_stderr_to_the_same_file(build):
    spec = build(cmd(stdout="logs/%x-%j.out"))
    assert spec.stdout == "logs/%x-%j.out"
    assert spec.stderr is None


def test_stderr_alone_keeps_the_default_stdout(build):
    spec = build(cmd(stderr="err-%j.txt"))
    assert spec.stdout == os.path.join("/var/log/corral", "%j.out")
    assert spec.stderr == "err-%j.txt"


def test_script_only_gives_a_spec_with_script_and_args(build):
    text = sbatch()
    spec = build({"script": text, "script_args": ["--lr", "0.1"]})
    assert spec.command == ()
    assert spec.script == text
    assert spec.script_args == ("--lr", "0.1")


def test_command_and_script_together_are_refused(build):
    invalid(build, {"command": ["true"], "script": sbatch()}, "command")


def test_neither_command_nor_script_is_refused(build):
    invalid(build, {"name": "x"}, "command")


def test_none_valued_fields_count_as_absent(build):
    spec = build({"command": ["true"], "script": None, "gpus": None, "mem": None, "name": None})
    assert spec.command == ("true",)
    assert spec.gpus == 0


@pytest.mark.parametrize("command", [[], [""], "python train.py", ["python", 3], ["a\0b"]])
def test_bad_command_is_refused(build, command):
    invalid(build, {"command": command}, "command")


@pytest.mark.parametrize("script", ["", "   ", "echo hi\n", "#!/bin/bash\necho \0\n", 42])
def test_bad_script_is_refused(build, script):
    invalid(build, {"script": script}, "script")


def test_script_args_with_a_command_are_refused(build):
    invalid(build, cmd(script_args=["x"]), "script_args")


def test_spec_is_frozen(build):
    spec = build(cmd())
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.cpus = 64  # type: ignore[misc]


def test_request_property_gives_the_scheduler_view(build):
    spec = build(cmd(gpus="a100:2", gpu_mem="40G", cpus=8, mem="32G"))
    assert spec.request == Request(gpus=2, gpu_type="a100", gpu_mem_mb=40 * 1024, cpus=8, mem_mb=32 * 1024)


# -- script directives and overrides ------------------------------------------------------------


def test_script_directives_fill_the_spec(build, workdir):
    text = sbatch(
        "#SBATCH --job-name=resnet", "#SBATCH --gres=gpu:a100:2", "#SBATCH --cpus-per-task=8", "#SBATCH --mem=32G",
        "#SBATCH --time=04:00:00", "#SBATCH --output=logs/%x-%j.out", "#SBATCH --error=logs/%x-%j.err",
        f"#SBATCH --chdir={workdir}", "#SBATCH --nodes=1", "#SBATCH --ntasks=1", "#SBATCH --export=ALL",
        "#SBATCH --partition=gpu",
    )
    spec = build({"script": text})
    assert spec.name == "resnet"
    assert (spec.gpus, spec.gpu_type) == (2, "a100")
    assert spec.cpus == 8
    assert spec.mem_mb == 32 * 1024
    assert spec.time_limit_s == 4 * 3600
    assert (spec.stdout, spec.stderr) == ("logs/%x-%j.out", "logs/%x-%j.err")
    assert spec.workdir == workdir
    assert spec.inherit_env is True
    assert spec.partition == "gpu" and spec.warnings == ()


def test_request_fields_override_script_directives(build, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    text = sbatch("#SBATCH -J fromscript -c 8 --mem=32G --time=60 --gres=gpu:2 -o a.out", f"#SBATCH -D {tmp_path}")
    spec = build({"script": text, "name": "fromrequest", "cpus": 2, "mem": "4G", "time": "5", "gres": "gpu:1",
                  "stdout": "b.out", "workdir": str(other)})
    assert spec.name == "fromrequest"
    assert spec.cpus == 2
    assert spec.mem_mb == 4096
    assert spec.time_limit_s == 300
    assert spec.gpus == 1
    assert spec.stdout == "b.out"
    assert spec.workdir == str(other)


def test_request_memory_overrides_a_script_memory_directive_of_another_kind(build):
    spec = build({"script": sbatch("#SBATCH --mem-per-cpu=4G -c 2"), "mem": "8G"})
    assert spec.mem_mb == 8 * 1024
    spec = build({"script": sbatch("#SBATCH --mem=64G"), "mem_mb": 1000})
    assert spec.mem_mb == 1000


def test_request_time_limit_in_seconds_overrides_a_script_time_directive(build):
    spec = build({"script": sbatch("#SBATCH --time=1:00:00"), "time_limit_s": 60})
    assert spec.time_limit_s == 60


def test_request_gres_overrides_a_script_gpus_directive(build):
    spec = build({"script": sbatch("#SBATCH --gpus=4"), "gres": "gpu:1"})
    assert spec.gpus == 1


def test_request_cpus_rescale_a_script_mem_per_cpu(build):
    spec = build({"script": sbatch("#SBATCH --mem-per-cpu=4G --cpus-per-task=8"), "cpus": 2})
    assert spec.mem_mb == 2 * 4 * 1024


def test_script_bad_directive_value_is_reported_on_its_field(build):
    invalid(build, {"script": sbatch("#SBATCH --time=soon")}, "time")


def test_script_unsupported_directive_is_refused(build):
    err = invalid(build, {"script": sbatch("#SBATCH --core-spec=2")}, "script")
    assert "--core-spec" in str(err)


# -- GPUs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "gpus", "gpu_type"),
    [
        ({"gpus": 2}, 2, None),
        ({"gpus": "2"}, 2, None),
        ({"gpus": "a100:2"}, 2, "a100"),
        ({"gpus": "a100"}, 1, "a100"),
        ({"gpus": "0"}, 0, None),
        ({"gres": "gpu:a100:2"}, 2, "a100"),
        ({"gres": "gpu:2"}, 2, None),
        ({"gres": "gpu"}, 1, None),
        ({"gres": "gpu:h100"}, 1, "h100"),
        ({"gpus": 2, "gpu_type": "H100"}, 2, "H100"),
        ({"gres": "gpu:a100:2", "gpus": 4}, 4, "a100"),
        ({"gpus": "a100-80g:1"}, 1, "a100-80g"),
    ],
)
def test_gpu_request_forms(build, fields, gpus, gpu_type):
    spec = build(cmd(**fields))
    assert (spec.gpus, spec.gpu_type) == (gpus, gpu_type)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"gpus": -1}, "gpus"),
        ({"gpus": "-1"}, "gpus"),
        ({"gpus": "2.5"}, "gpus"),
        ({"gpus": 2.5}, "gpus"),
        ({"gpus": "a100:-1"}, "gpus"),
        ({"gpus": 5000}, "gpus"),
        ({"gpus": True}, "gpus"),
        ({"gpus": "a:b:c"}, "gpus"),
        ({"gres": "mps:100"}, "gres"),
        ({"gres": "gpu:a100:2,gpu:h100:1"}, "gres"),
        ({"gres": "gpu:a100:x"}, "gres"),
        ({"gres": "gpu:-2"}, "gres"),
        ({"gpu_type": "a100"}, "gpu_type"),  # a type but no GPUs
        ({"gpus": 1, "gpu_type": "a 100"}, "gpu_type"),
        ({"gpus": 1, "gpu_type": "a100;rm"}, "gpu_type"),
    ],
)
def test_bad_gpu_requests_are_refused_naming_the_field(build, fields, field):
    invalid(build, cmd(**fields), field)


def test_gpu_memory_forms(build):
    assert build(cmd(gpus=1, gpu_mem="40G")).gpu_mem_mb == 40 * 1024
    assert build(cmd(gpus=1, gpu_mem_mb=1234)).gpu_mem_mb == 1234
    invalid(build, cmd(gpus=1, gpu_mem="40G", gpu_mem_mb=1), "gpu_mem")
    invalid(build, cmd(gpus=1, gpu_mem="lots"), "gpu_mem")


# -- CPUs, memory, time, nice ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cpus": 0}, "cpus"),
        ({"cpus": -4}, "cpus"),
        ({"cpus": "four"}, "cpus"),
        ({"cpus": 2.5}, "cpus"),
        ({"cpus": 10**9}, "cpus"),
        ({"time": 0}, "time"),
        ({"time": "0"}, "time"),
        ({"time": -5}, "time"),
        ({"time": "tomorrow"}, "time"),
        ({"time": "400-00:00:00"}, "time"),
        ({"time_limit_s": 0}, "time_limit_s"),
        ({"time": "1:00", "time_limit_s": 60}, "time"),
        ({"nice": 1e9}, "nice"),
        ({"nice": 10**9}, "nice"),
        ({"nice": "high"}, "nice"),
        ({"mem": "-1G"}, "mem"),
        ({"mem": "lots"}, "mem"),
        ({"mem": -1}, "mem"),
        ({"mem_mb": -1}, "mem_mb"),
        ({"mem": "1G", "mem_per_cpu": "1G"}, "mem_per_cpu"),
        ({"mem_per_gpu": "10G"}, "mem_per_gpu"),  # but no GPUs
        ({"name": "two\nlines"}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"name": 7}, "name"),
        ({"colour": "blue"}, "colour"),
        ({"env": {"1BAD": "x"}}, "env"),
        ({"env": {"A-B": "x"}}, "env"),
        ({"env": {"OK": "a\0b"}}, "env"),
        ({"env": ["A=1"]}, "env"),
        ({"env": {"BIG": "x" * (1 << 20)}}, "env"),
        ({"workdir": "relative/dir"}, "workdir"),
        ({"workdir": "/no/such/dir/anywhere"}, "workdir"),
        ({"workdir": ""}, "workdir"),
        ({"stdout": "%q.out"}, "stdout"),
        ({"stderr": "  "}, "stderr"),
        ({"labels": {"bad key!": "v"}}, "labels"),
        ({"labels": {"k": "v" * 257}}, "labels"),
        ({"export": " , "}, "export"),
    ],
)
def test_bad_values_are_refused_naming_the_field(build, fields, field):
    invalid(build, cmd(**fields), field)


def test_unknown_field_error_lists_known_fields(build):
    err = invalid(build, cmd(gpu="1"), "gpu")
    assert "gpus" in str(err)


def test_missing_default_workdir_is_refused(build, tmp_path):
    with pytest.raises(InvalidRequest) as err:
        build(cmd(), default_workdir=str(tmp_path / "gone"))
    assert err.value.field == "submit_dir"


def test_workdir_is_normalised(build, tmp_path):
    (tmp_path / "a").mkdir()
    assert build(cmd(workdir=f"{tmp_path}/a/../a/")).workdir == str(tmp_path / "a")


@pytest.mark.parametrize(
    ("fields", "mem_mb"),
    [
        ({"mem": "16G"}, 16 * 1024),
        ({"mem": 2048}, 2048),
        ({"mem_mb": 1500}, 1500),
        ({"mem_per_cpu": "2G", "cpus": 4}, 8 * 1024),
        ({"mem_per_cpu": "2G"}, 2 * 1024),
        ({"mem_per_gpu": "10G", "gpus": 3}, 30 * 1024),
    ],
)
def test_memory_forms(build, fields, mem_mb):
    assert build(cmd(**fields)).mem_mb == mem_mb


@pytest.mark.parametrize(
    ("time", "seconds"), [("90", 5400), (90, 5400), ("1:30", 90), ("2-12", 216000), ("2h", 7200), ("UNLIMITED", None)]
)
def test_time_forms(build, time, seconds):
    assert build(cmd(time=time)).time_limit_s == seconds


def test_time_limit_s_is_seconds(build):
    assert build(cmd(time_limit_s=45)).time_limit_s == 45


def test_nice_accepts_text_and_negative_values(build):
    assert build(cmd(nice="50")).nice == 50
    assert build(cmd(nice=-10)).nice == -10


def test_labels_are_kept(build):
    assert build(cmd(labels={"team": "vision", "exp/run": 3})).labels == {"team": "vision", "exp/run": "3"}


# -- environment (--export) --------------------------------------------------------------------


def test_export_none_keeps_only_minimal_vars_from_the_snapshot(build):
    spec = build(cmd(export="NONE", environment=SNAPSHOT))
    assert spec.inherit_env is False
    assert spec.env == {k: SNAPSHOT[k] for k in MINIMAL_ENV_KEYS if k in SNAPSHOT}
    assert "WANDB_API_KEY" not in spec.env


def test_export_none_without_snapshot_takes_minimal_vars_from_the_server(build):
    spec = build(cmd(export="NONE"))
    assert spec.inherit_env is False
    assert spec.env == {"PATH": "/usr/bin:/bin", "HOME": "/home/server", "USER": "server"}


def test_export_all_with_snapshot_copies_it(build):
    spec = build(cmd(export="ALL", environment=SNAPSHOT))
    assert spec.inherit_env is False
    assert spec.env == SNAPSHOT


def test_export_defaults_to_all(build):
    assert build(cmd(environment=SNAPSHOT)).env == SNAPSHOT
    spec = build(cmd())
    assert spec.inherit_env is True
    assert spec.env == {}


def test_export_all_without_snapshot_inherits_the_server_environment(build):
    spec = build(cmd(export="ALL"))
    assert spec.inherit_env is True
    assert spec.env == {}


def test_export_all_with_assignment_adds_the_variable(build):
    spec = build(cmd(export="ALL,FOO=bar", environment=SNAPSHOT))
    assert spec.env == {**SNAPSHOT, "FOO": "bar"}
    spec = build(cmd(export="ALL,FOO=bar"))
    assert spec.inherit_env is True
    assert spec.env == {"FOO": "bar"}


def test_export_is_case_insensitive_for_all_and_none(build):
    assert build(cmd(export="all", environment=SNAPSHOT)).env == SNAPSHOT
    assert "FOO" not in build(cmd(export="none", environment=SNAPSHOT)).env


def test_export_list_of_names_passes_minimal_vars_and_those_names(build):
    spec = build(cmd(export="FOO,PYTHONPATH,MISSING,X=1", environment=SNAPSHOT))
    assert spec.inherit_env is False
    expected = {k: SNAPSHOT[k] for k in MINIMAL_ENV_KEYS if k in SNAPSHOT}
    expected.update(FOO="from-shell", PYTHONPATH="/home/alice/lib", X="1")
    assert spec.env == expected


def test_export_none_with_assignment_adds_it(build):
    spec = build(cmd(export="NONE,FOO=bar", environment=SNAPSHOT))
    assert spec.env["FOO"] == "bar"
    assert "WANDB_API_KEY" not in spec.env


def test_explicit_env_wins_over_export(build):
    spec = build(cmd(export="ALL,FOO=bar", environment=SNAPSHOT, env={"FOO": "explicit", "N": 3}))
    assert spec.env["FOO"] == "explicit"
    assert spec.env["N"] == "3"


def test_script_export_directive_applies(build):
    spec = build({"script": sbatch("#SBATCH --export=NONE"), "environment": SNAPSHOT})
    assert "WANDB_API_KEY" not in spec.env
    assert spec.env["HOME"] == "/home/alice"


def test_bad_environment_snapshot_is_refused(build):
    invalid(build, cmd(environment="PATH=/bin"), "environment")


# -- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["python", "train.py"], "train.py"),
        (["python", "-u", "scripts/train.py", "--lr", "1"], "train.py"),
        (["/usr/bin/python3", "train.py"], "train.py"),
        (["torchrun", "--standalone", "ddp.py"], "ddp.py"),
        (["sh", "-c", "echo hi"], "sh"),
        (["bash", "-c", "echo hi; sleep 1"], "bash"),
        (["./run.sh", "arg"], "run.sh"),
        (["/opt/bin/trainer"], "trainer"),
        (["python"], "python"),
    ],
)
def test_default_job_name_comes_from_the_command(build, command, name):
    assert build({"command": command}).name == name


def test_default_job_name_of_a_script_is_its_file_name(build):
    assert build({"script": sbatch(), "script_name": "train.sh"}).name == "train.sh"
    assert build({"script": sbatch(), "script_name": "/home/alice/jobs/train.sh"}).name == "train.sh"


def test_default_job_name_of_an_unnamed_script(build):
    assert build({"script": sbatch()}).name == "script"


def test_script_name_directive_beats_the_file_name(build):
    assert build({"script": sbatch("#SBATCH -J fromdirective"), "script_name": "train.sh"}).name == "fromdirective"


def test_given_name_is_kept(build):
    assert build(cmd(name="my run (v2)")).name == "my run (v2)"


def test_request_gpu_count_keeps_the_type_from_a_script_gres(build):
    spec = build({"script": sbatch("#SBATCH --gres=gpu:a100:2"), "gpus": "4"})
    assert (spec.gpus, spec.gpu_type) == (4, "a100")
    spec = build({"script": sbatch("#SBATCH --gres=gpu:a100:2"), "gpus": "h100:1"})
    assert (spec.gpus, spec.gpu_type) == (1, "h100")


# -- sbatch's command line (`options`): over #SBATCH lines, under the request's fields --------------


def test_options_override_script_directives_and_request_fields_override_options(build):
    text = sbatch("#SBATCH -J fromscript -c 8 --mem=32G --time=60 --gpus=4 -o a.out --comment=script")
    spec = build({"script": text, "options": ["-J", "fromoptions", "-c", "4", "--mem-per-cpu=1G", "--gres=gpu:2",
                                              "--comment=options"], "cpus": 2})
    assert spec.name == "fromoptions"  # options over #SBATCH
    assert spec.cpus == 2  # the request's field over options
    assert spec.mem_mb == 2 * 1024  # --mem-per-cpu replaces the script's --mem, scaled by the request's cpus
    assert spec.gpus == 2  # --gres replaces the script's --gpus
    assert spec.time_limit_s == 3600 and spec.stdout == "a.out"  # what options leave alone, the script says
    assert spec.comment == "options"


def test_options_apply_to_a_command_too(build):
    spec = build(cmd(options=["-J", "prep", "--mem=4G", "--open-mode=append", "-H", "-A", "ml", "--comment", "c"]))
    assert (spec.name, spec.mem_mb, spec.open_mode, spec.hold, spec.account, spec.comment) == \
        ("prep", 4096, "append", True, "ml", "c")


def test_hold_open_mode_and_comment_default_and_come_as_fields(build):
    spec = build(cmd())
    assert (spec.open_mode, spec.hold, spec.comment) == ("truncate", False, None)
    spec = build(cmd(hold=True, open_mode="append", comment="note"))
    assert (spec.open_mode, spec.hold, spec.comment) == ("append", True, "note")
    assert build(cmd(options=["-H"], hold="no")).hold is False


@pytest.mark.parametrize("request_, field", [
    ({"open_mode": "sometimes"}, "open_mode"), ({"hold": "maybe"}, "hold"), ({"comment": 5}, "comment"),
    ({"comment": "a\nb"}, "comment"), ({"comment": "x" * 1001}, "comment"), ({"options": "--mem=1G"}, "options"),
])
def test_bad_hold_open_mode_comment_and_options_are_refused_by_field(build, request_, field):
    invalid(build, cmd(**request_), field)


def test_a_bad_option_value_is_named_as_typed_on_its_field(build):
    err = invalid(build, cmd(options=["--mem=lots"]), "mem")
    assert err.problems[0].startswith("sbatch --mem=lots: ")
    err = invalid(build, cmd(options=["-A", "b@d"]), "account")
    assert err.problems[0].startswith("sbatch -A=b@d: ")


def test_every_bad_option_is_listed_at_once_naming_sbatch(build):
    err = invalid(build, cmd(options=["--core-spec=2", "--time=soon", "--overcommit"]), "options")
    assert "3 problems in the sbatch options" in err.message
    assert [p.split(" ")[:3] for p in err.problems[:2]] == [["sbatch", "option", "--core-spec"],
                                                           ["sbatch", "option", "--overcommit"]]
    assert err.problems[2].startswith("sbatch --time=soon: ")


def test_an_option_overriding_a_bad_directive_hides_it_as_a_request_field_does(build):
    spec = build({"script": sbatch("#SBATCH --time=soon"), "options": ["--time=10"]})
    assert spec.time_limit_s == 600


def test_a_bad_directive_and_a_bad_option_are_each_named_where_they_are(build):
    err = invalid(build, {"script": sbatch("#SBATCH --time=soon"), "options": ["--mem=1G"]}, "time")
    assert err.problems == (err.message[len("time: "):],) and err.problems[0].startswith("line 2: #SBATCH --time=soon: ")
    err = invalid(build, {"script": sbatch("#SBATCH --time=10"), "options": ["--mem=1Q"]}, "mem")
    assert err.problems[0].startswith("sbatch --mem=1Q: ")


def test_update_keeps_the_container_and_cannot_change_it():
    from corral.core.jobspec.spec import update_spec
    from tests.helpers import make_spec

    spec = make_spec(image="ubuntu:22.04", container_mounts="/data")
    assert update_spec(spec, {"time": "10"}).container == spec.container
    for field in ("image", "container_mounts", "container_remap_root"):
        with pytest.raises(InvalidRequest) as err:
            update_spec(spec, {field: "x"})
        assert err.value.field == field and "cannot be changed after submit" in str(err.value)


def test_requeue_is_kept_as_said_and_a_bad_value_names_the_field(build):
    assert build({"command": ["true"]}).requeue is None  # not said: Slurm's default (a batch job waits again)
    assert build({"command": ["true"], "requeue": "no"}).requeue is False
    assert build({"command": ["true"], "requeue": True}).requeue is True
    assert "yes or no" in str(invalid(build, {"command": ["true"], "requeue": "maybe"}, "requeue"))
