"""`#SBATCH` headers: what a Slurm user's script asks for, and what corral refuses."""

from __future__ import annotations

import pytest

from corral.core.dialects.sbatch import check_shebang, parse_options, parse_script
from corral.errors import InvalidRequest

TUTORIAL_SCRIPT = """\
#!/bin/bash
#SBATCH --job-name=resnet50
#SBATCH --gres=gpu:a100:2
#SBATCH --cpus-per-task=8
#SBATCH --mem=32G
#SBATCH --time=04:00:00
#SBATCH --output=logs/%x-%j.out
#SBATCH --error=logs/%x-%j.err
#SBATCH --chdir=/home/alice/project
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --export=ALL

module load cuda/12.1
source .venv/bin/activate
srun python train.py --epochs 90
"""


def script(*lines: str) -> str:
    return "\n".join(["#!/bin/bash", *lines, "python train.py", ""])


def test_parse_script_reads_a_tutorial_batch_script():
    directives = parse_script(TUTORIAL_SCRIPT)
    assert directives.fields == {
        "name": "resnet50",
        "gres": "gpu:a100:2",
        "cpus": "8",
        "mem": "32G",
        "time": "04:00:00",
        "stdout": "logs/%x-%j.out",
        "stderr": "logs/%x-%j.err",
        "workdir": "/home/alice/project",
        "export": "ALL",
        "nodes": "1",
        "ntasks": "1",
    }
    assert directives.warnings == []


def test_parse_script_reads_short_options():
    directives = parse_script(script("#SBATCH -J name", "#SBATCH -c 4", "#SBATCH -t 10", "#SBATCH -o out"))
    assert directives.fields == {"name": "name", "cpus": "4", "time": "10", "stdout": "out"}


def test_parse_script_reads_short_options_with_attached_values():
    directives = parse_script(script("#SBATCH -c4 -Jname -e err.txt -G2 -D /tmp"))
    assert directives.fields == {"cpus": "4", "name": "name", "stderr": "err.txt", "gpus": "2", "workdir": "/tmp"}


def test_parse_script_reads_long_options_with_separate_values():
    directives = parse_script(script("#SBATCH --job-name train --mem 16G"))
    assert directives.fields == {"name": "train", "mem": "16G"}


def test_parse_script_reads_several_options_on_one_line():
    directives = parse_script(script("#SBATCH --cpus-per-task=2 --mem=4G --time=30"))
    assert directives.fields == {"cpus": "2", "mem": "4G", "time": "30"}


@pytest.mark.parametrize(
    ("line", "fields"),
    [
        ("#SBATCH --gpus=a100:2", {"gpus": "a100:2"}),
        ("#SBATCH --gpus-per-node=4", {"gpus": "4"}),
        ("#SBATCH --gpus-per-task=1", {"gpus_per_task": "1"}),
        ("#SBATCH --mem-per-cpu=4G", {"mem_per_cpu": "4G"}),
        ("#SBATCH --mem-per-gpu=20G", {"mem_per_gpu": "20G"}),
        ("#SBATCH --nice=10", {"nice": "10"}),
        ("#SBATCH --nice", {"nice": "100"}),  # sbatch's bare --nice
        ("#SBATCH --export=NONE", {"export": "NONE"}),
        ("#SBATCH -N 1 -n 1", {"nodes": "1", "ntasks": "1"}),
        ("#SBATCH --nodes=1-1 --ntasks-per-node=1", {"nodes": "1", "ntasks_per_node": "1"}),
        ("#SBATCH -N 2 --gpus-per-node=4", {"nodes": "2", "gpus": "4"}),
    ],
)
def test_parse_script_maps_each_supported_option_to_its_request_field(line, fields):
    assert parse_script(script(line)).fields == fields


def test_parse_script_keeps_quoted_values_whole():
    directives = parse_script(script('#SBATCH --job-name="my run" --comment=\'a b\''))
    assert directives.fields == {"name": "my run", "comment": "a b"}


def test_parse_script_later_directive_wins_over_earlier():
    directives = parse_script(script("#SBATCH --mem=4G", "#SBATCH --mem=8G"))
    assert directives.fields["mem"] == "8G"


def test_parse_script_ignores_directives_after_the_first_command():
    text = "#!/bin/bash\n#SBATCH --mem=4G\necho start\n#SBATCH --mem=64G\n#SBATCH --array=0-3\n"
    directives = parse_script(text)
    assert directives.fields == {"mem": "4G"}


def test_parse_script_reads_past_blank_lines_and_plain_comments():
    text = "#!/bin/bash\n\n# train the model\n   \n#SBATCH --cpus-per-task=4\n\n#SBATCH -J late\npython x.py\n"
    assert parse_script(text).fields == {"cpus": "4", "name": "late"}


def test_parse_script_ignores_commented_out_directives():
    # `##SBATCH` and `# SBATCH` are how Slurm users switch a directive off
    directives = parse_script(script("##SBATCH --array=0-3", "# SBATCH --exclusive", "#SBATCH --cpus-per-task=2"))
    assert directives.fields == {"cpus": "2"}


def test_parse_script_ignores_trailing_comment_on_a_directive_line():
    directives = parse_script(script("#SBATCH --mem=16G  # plenty for ResNet", "#SBATCH -c 4 # --array=1-3"))
    assert directives.fields == {"mem": "16G", "cpus": "4"}


def test_parse_script_indented_directive_is_read():
    assert parse_script(script("   #SBATCH --mem=2G")).fields == {"mem": "2G"}


@pytest.mark.parametrize("option", ["--wckey=ml", "--hint=nomultithread", "--get-user-env"])
def test_parse_script_warns_about_harmless_options_and_goes_on(option):
    directives = parse_script(script(f"#SBATCH {option}", "#SBATCH --mem=1G"))
    assert directives.fields == {"mem": "1G"}
    assert len(directives.warnings) == 1
    name = option.lstrip("-").split("=")[0].split()[0]
    assert f"--{name}" in directives.warnings[0]
    assert "ignored" in directives.warnings[0]


@pytest.mark.parametrize("option, fields", [
    ("--partition=gpu", {"partition": "gpu"}), ("-p gpu", {"partition": "gpu"}),
    ("--qos=high", {"qos": "high"}), ("-q high", {"qos": "high"}),
])
def test_parse_script_reads_partition_and_qos(option, fields):
    directives = parse_script(script(f"#SBATCH {option}"))
    assert directives.fields == fields and directives.warnings == []


@pytest.mark.parametrize(
    ("option", "name"),
    [
        ("--overcommit", "--overcommit"),
        ("--contiguous", "--contiguous"),
        ("--core-spec=2", "--core-spec"),
        ("--exclusive=user", "--exclusive"),
        ("--mem-per-cpu-typo=1", "--mem-per-cpu-typo"),
    ],
)
def test_parse_script_refuses_unsupported_options_naming_them(option, name):
    with pytest.raises(InvalidRequest) as err:
        parse_script(script(f"#SBATCH {option}"))
    assert err.value.field == "script"
    assert name in str(err.value)
    assert "not supported" in str(err.value)


@pytest.mark.parametrize("options, ntasks, per_node, cpus, gpus", [
    ("--ntasks=4", 4, None, 4, 0), ("-n 2 -c 3", 2, None, 6, 0), ("--ntasks-per-node=2", 2, 2, 2, 0),
    ("-n 2 --gpus-per-task=1", 2, None, 2, 2), ("-n 2 --ntasks-per-node=4 --gpus-per-task=a100:2", 2, 4, 2, 4),
])
def test_a_multi_task_job_holds_each_tasks_cpus_and_gpus_on_its_one_node(options, ntasks, per_node, cpus, gpus):
    from corral.core.jobspec.spec import build_spec

    spec = build_spec({"script": script(f"#SBATCH {options}")}, user="ada", log_dir="/tmp", default_workdir="/tmp",
                      server_env={})
    assert (spec.ntasks, spec.ntasks_per_node, spec.cpus, spec.gpus) == (ntasks, per_node, cpus, gpus)
    assert spec.cpus_per_task == cpus // spec.tasks_per_node


@pytest.mark.parametrize("fields, field", [
    ({"ntasks": 5, "ntasks_per_node": 2}, "ntasks"), ({"ntasks": 0}, "ntasks"),
    ({"gpus_per_task": 1, "gpus": 2, "ntasks": 2}, "gpus_per_task"),
])
def test_task_counts_that_cannot_hold_are_refused_by_name(fields, field):
    from corral.core.jobspec.spec import build_spec

    with pytest.raises(InvalidRequest) as err:
        build_spec({"command": ["true"], **fields}, user="ada", log_dir="/tmp", default_workdir="/tmp", server_env={})
    assert err.value.field == field


def test_parse_script_refuses_a_range_of_node_counts():
    with pytest.raises(InvalidRequest) as err:
        parse_script(script("#SBATCH --nodes=1-2"))
    assert err.value.field == "script" and "range of node counts" in str(err.value)


def test_parse_script_refuses_a_script_without_shebang():
    with pytest.raises(InvalidRequest) as err:
        parse_script("#SBATCH --mem=1G\npython train.py\n")
    assert err.value.field == "script"
    assert "#!" in str(err.value)


def test_check_shebang_accepts_any_interpreter():
    check_shebang("#!/usr/bin/env python3\nprint(1)\n")


def test_parse_script_refuses_an_option_missing_its_value():
    with pytest.raises(InvalidRequest) as err:
        parse_script(script("#SBATCH --mem"))
    assert "--mem" in str(err.value)
    assert "needs a value" in str(err.value)


def test_parse_script_refuses_a_directive_that_is_not_an_option():
    with pytest.raises(InvalidRequest) as err:
        parse_script(script("#SBATCH mem=16G"))
    assert err.value.field == "script"
    assert "mem=16G" in str(err.value)


def test_parse_script_refuses_an_unreadable_directive_line():
    with pytest.raises(InvalidRequest) as err:
        parse_script(script('#SBATCH --job-name="unclosed'))
    assert err.value.field == "script"
    assert "unclosed" in str(err.value)


def test_parse_options_reads_a_command_line_style_token_list():
    directives = parse_options(["--gres=gpu:2", "-c", "4", "--wckey", "ml"], source="--sbatch")
    assert directives.fields == {"gres": "gpu:2", "cpus": "4"}
    assert directives.warnings == ["--sbatch --wckey=ml has no effect on corral's local backend; ignored"]


def test_parse_options_error_names_the_source():
    with pytest.raises(InvalidRequest) as err:
        parse_options(["--core-spec=2"], source="--sbatch")
    assert "--sbatch option --core-spec" in str(err.value)


def test_parse_options_empty_gives_nothing():
    directives = parse_options([])
    assert directives.fields == {} and directives.warnings == []


MULTI_NODE_SCRIPT = """\
#!/bin/bash
#SBATCH --job-name=ddp
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --overcommit
#SBATCH --core-spec=2
#SBATCH --time=2-00:00:00x
srun python train.py
"""


def test_parse_script_names_every_unsupported_directive_at_once_with_its_line():
    with pytest.raises(InvalidRequest) as err:
        parse_script(MULTI_NODE_SCRIPT)
    assert err.value.field == "script"
    assert err.value.problems == (
        "line 6: #SBATCH option --overcommit is not supported by corral (remove it)",
        err.value.problems[1],
    )
    assert err.value.problems[1].startswith("line 7: #SBATCH option --core-spec is not supported by corral "
                                            "(remove it")
    assert "2 problems" in err.value.message
    for problem in err.value.problems:
        assert problem in err.value.message
    assert err.value.to_dict()["problems"] == list(err.value.problems)


def test_parse_script_reads_past_an_unreadable_line_to_the_next_problem():
    with pytest.raises(InvalidRequest) as err:
        parse_script(script('#SBATCH --job-name="unclosed', "#SBATCH --overcommit", "#SBATCH mem=1G"))
    lines = [p.split(":")[0] for p in err.value.problems]
    assert lines == ["line 2", "line 3", "line 4"]
    assert "unclosed" in err.value.problems[0] and "--overcommit" in err.value.problems[1]
    assert "'mem=1G' is not an option" in err.value.problems[2]


def test_an_option_never_takes_its_value_from_the_next_directive_line():
    with pytest.raises(InvalidRequest) as err:
        parse_script(script("#SBATCH --mem", "#SBATCH --time=10"))
    assert err.value.problems == ("line 2: #SBATCH option --mem needs a value (e.g. --mem=VALUE)",)


def test_build_spec_lists_a_scripts_bad_directives_values_and_node_count_together():
    from corral.core.jobspec.spec import build_spec

    with pytest.raises(InvalidRequest) as err:
        build_spec({"script": MULTI_NODE_SCRIPT}, user="ada", log_dir="/tmp", default_workdir="/tmp", server_env={},
                   max_nodes=1)
    problems = err.value.problems
    assert [p.split(":")[0] for p in problems] == ["line 3", "line 6", "line 7", "line 8"]
    assert "--nodes=4: this server runs each job on one machine" in problems[0]
    assert "corral up --backend slurm" in problems[0]
    assert "--time=2-00:00:00x: cannot read '2-00:00:00x' as a duration" in problems[3]
    assert err.value.message.startswith("script: 4 problems in the script's directives")
    assert err.value.message.count("\n  line ") == 4


def test_a_request_field_that_replaces_a_bad_directive_hides_its_problem():
    from corral.core.jobspec.spec import build_spec

    text = script("#SBATCH --time=soon", "#SBATCH --cpus-per-task=lots")
    with pytest.raises(InvalidRequest) as err:
        build_spec({"script": text}, user="ada", log_dir="/tmp", default_workdir="/tmp", server_env={})
    assert len(err.value.problems) == 2
    spec = build_spec({"script": text, "time": "10", "cpus": 2}, user="ada", log_dir="/tmp", default_workdir="/tmp",
                      server_env={})
    assert (spec.time_limit_s, spec.cpus) == (600, 2)


# -- options submitit and lab scripts write: made real ----------------------------------------------


@pytest.mark.parametrize("tokens, fields", [
    (["-H"], {"hold": "yes"}), (["--hold"], {"hold": "yes"}),
    (["-A", "ml"], {"account": "ml"}), (["--account=ml"], {"account": "ml"}), (["-Aml"], {"account": "ml"}),
    (["--open-mode=append"], {"open_mode": "append"}), (["--open-mode", "truncate"], {"open_mode": "truncate"}),
    (["--comment=warm start"], {"comment": "warm start"}),
])
def test_parse_options_reads_hold_account_open_mode_and_comment(tokens, fields):
    directives = parse_options(tokens, source="sbatch")
    assert directives.fields == fields and directives.warnings == []


def test_submitits_header_is_read_whole():
    # what submitit's SlurmExecutor writes at the top of every script
    directives = parse_script(script("#SBATCH --job-name=submitit", "#SBATCH --open-mode=append",
                                     "#SBATCH --output=/tmp/x/%j_0_log.out", "#SBATCH --signal=USR2@90",
                                     "#SBATCH --requeue", "#SBATCH --wckey=submitit"))
    assert directives.fields == {"name": "submitit", "open_mode": "append", "stdout": "/tmp/x/%j_0_log.out",
                                 "signal": "USR2@90", "requeue": "yes"}
    assert len(directives.warnings) == 1


@pytest.mark.parametrize("option, requeue", [("--requeue", "yes"), ("--no-requeue", "no")])
def test_requeue_says_whether_the_job_waits_again_when_its_gpu_fails(option, requeue):
    directives = parse_script(script(f"#SBATCH {option}"))
    assert directives.fields == {"requeue": requeue} and directives.warnings == []
    with pytest.raises(InvalidRequest, match="takes no value"):
        parse_options([f"{option}=1"])


def test_a_bad_open_mode_names_both_modes():
    with pytest.raises(InvalidRequest) as err:
        parse_options(["--open-mode=appendd"], source="sbatch")
    assert err.value.problems == ("sbatch --open-mode=appendd: give --open-mode=append (keep what the files hold) "
                                  "or --open-mode=truncate (the default)",)


@pytest.mark.parametrize("tokens, fields", [
    (["--begin=now+1hour"], {"begin": "now+1hour"}),
    (["-b", "16:00"], {"begin": "16:00"}),
    (["--deadline=2030-01-01"], {"deadline": "2030-01-01"}),
    (["--exclusive"], {"exclusive": "yes"}),
    (["--constraint=a100"], {"constraint": "a100"}),
    (["-C", "a100&nvlink"], {"constraint": "a100&nvlink"}),
    (["--nodelist=vm"], {"nodelist": "vm"}),
    (["-w", "vm"], {"nodelist": "vm"}),
    (["--exclude=vm"], {"exclude": "vm"}),
    (["-x", "vm"], {"exclude": "vm"}),
    (["--cpus-per-gpu=4"], {"cpus_per_gpu": "4"}),
    (["--gpus-per-task=2"], {"gpus_per_task": "2"}),
    (["--time-min=10"], {"time_min": "10"}),
    (["--priority=5"], {"priority": "5"}),
    (["--mail-type=END,FAIL"], {"mail_type": "END,FAIL"}),
    (["--mail-user", "a@b.c"], {"mail_user": "a@b.c"}),
])
def test_slurms_placement_time_and_mail_options_become_request_fields(tokens, fields):
    directives = parse_options([*tokens, "--mem=1G"], source="sbatch")
    assert directives.fields == {**fields, "mem": "1G"} and directives.warnings == []


def test_read_options_refuses_what_is_not_a_token_list():
    from corral.core.dialects.sbatch import read_options

    for value in ("--mem=1G", ["--mem=1G", 4], {"mem": "1G"}):
        with pytest.raises(InvalidRequest) as err:
            read_options(value)
        assert err.value.field == "options"


# -- Pyxis's container options ------------------------------------------------------------------------


@pytest.mark.parametrize("tokens, fields", [
    (["--container-image=nvcr.io#nvidia/pytorch:24.01-py3"], {"image": "nvcr.io#nvidia/pytorch:24.01-py3"}),
    (["--container-image", "ubuntu:22.04"], {"image": "ubuntu:22.04"}),
    (["--container-mounts=/data:/data:ro,/scratch"], {"container_mounts": "/data:/data:ro,/scratch"}),
    (["--container-workdir=/workspace"], {"container_workdir": "/workspace"}),
    (["--container-env=NCCL_DEBUG,WANDB_MODE"], {"container_env": "NCCL_DEBUG,WANDB_MODE"}),
    (["--no-container-mount-home"], {"container_mount_home": "no"}),
    (["--container-remap-root"], {"container_remap_root": "yes"}),
])
def test_pyxis_container_options_become_request_fields(tokens, fields):
    directives = parse_options(tokens, source="sbatch")
    assert directives.fields == fields and directives.warnings == []


def test_a_scripts_pyxis_directives_make_the_jobs_container():
    from corral.core.jobspec.spec import build_spec
    from corral.core.jobspec.spec_container import Mount

    text = script("#SBATCH --container-image=docker://ubuntu:22.04 --container-mounts=/data:/in:ro",
                  "#SBATCH --container-workdir=/in --container-env=HF_HOME",
                  "#SBATCH --no-container-mount-home --container-remap-root")
    spec = build_spec({"script": text}, user="ada", log_dir="/tmp", default_workdir="/tmp", server_env={})
    container = spec.container
    assert container is not None and container.image == "docker://ubuntu:22.04"
    assert container.mounts == (Mount("/data", "/in", True),)
    assert (container.workdir, container.env, container.mount_home, container.remap_root) == (
        "/in", ("HF_HOME",), False, True)


def test_a_script_without_an_image_has_no_container():
    from corral.core.jobspec.spec import build_spec

    spec = build_spec({"script": script("#SBATCH --mem=1G")}, user="ada", log_dir="/tmp", default_workdir="/tmp",
                      server_env={})
    assert spec.container is None


def test_the_command_lines_image_wins_over_the_scripts():
    from corral.core.jobspec.spec import build_spec

    spec = build_spec({"script": script("#SBATCH --container-image=ubuntu:20.04"),
                       "options": ["--container-image=ubuntu:22.04"]},
                      user="ada", log_dir="/tmp", default_workdir="/tmp", server_env={})
    assert spec.container is not None and spec.container.image == "ubuntu:22.04"


def test_a_named_container_is_refused_with_its_line():
    with pytest.raises(InvalidRequest) as err:
        parse_script(script("#SBATCH --container-image=ubuntu:22.04", "#SBATCH --container-name=dev"))
    assert err.value.problems[0].startswith("line 3: #SBATCH --container-name=dev: named containers are not supported")


def test_a_pyxis_flag_given_a_value_is_refused():
    with pytest.raises(InvalidRequest) as err:
        parse_options(["--container-remap-root=yes"])
    assert "--container-remap-root=yes: a flag takes no value" in str(err.value)


def test_the_unsupported_option_message_lists_the_container_options():
    with pytest.raises(InvalidRequest) as err:
        parse_options(["--container-imag=x"])
    assert "--container-image --container-mounts" in str(err.value)
