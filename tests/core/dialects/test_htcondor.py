"""HTCondor submit files: a job written for HTCondor runs on corral as it would there, or is refused."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from corral.core.dialects.htcondor import condor_request
from corral.core.jobspec.arrays import MAX_TASKS
from corral.core.jobspec.spec import REQUEST_FIELDS, JobSpec, build_spec
from corral.errors import InvalidRequest

# A GPU array job, as HTCondor tutorials write one.
GPU_TUTORIAL = """\
# Submit 10 training runs, one GPU each
universe       = vanilla
executable     = train.sh
arguments      = --epochs 90 --data /data/imagenet
request_gpus   = 1
request_cpus   = 4
request_memory = 8GB
request_disk   = 20GB
output         = out.$(Cluster).$(Process)
error          = err.$(Cluster).$(Process)
log            = job.$(Cluster).log
should_transfer_files   = YES
when_to_transfer_output = ON_EXIT
queue 10
"""

# CHTC's "hello world" with arguments: a single job.
CHTC_HELLO = """\
# hello-chtc.sub
executable = hello-chtc.sh
arguments = $(Process)
log = hello-chtc_$(Cluster).log
error = hello-chtc_$(Cluster)_$(Process).err
output = hello-chtc_$(Cluster)_$(Process).out
request_cpus = 1
request_memory = 1GB
request_disk = 1GB
queue 1
"""


def accepted(text: str, workdir: Path) -> tuple[dict, list[str], JobSpec]:
    """condor_request's answer, after checking that build_spec takes it as it is."""
    request, warnings = condor_request(text, max_tasks=MAX_TASKS)
    assert set(request) <= REQUEST_FIELDS
    spec = build_spec(request, user="u", log_dir="/tmp", default_workdir=str(workdir), server_env={})
    return request, warnings, spec


def refused(text: str, field: str) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as err:
        condor_request(text, max_tasks=MAX_TASKS)
    assert err.value.field == field, str(err.value)
    return err.value


def submit(*lines: str, executable: str = "/bin/echo", queue: str = "queue") -> str:
    return "\n".join([f"executable = {executable}", *lines, queue, ""])


def argv_of(text: str, tmp_path: Path) -> list[str]:
    """The arguments a file's job passes, read from the file's parsed command (no shell involved)."""
    request, _, _ = accepted(text, tmp_path)
    return request["command"][1:]


@pytest.fixture
def argv_printer(tmp_path: Path) -> Path:
    """An executable that writes its arguments, its stdin and some variables as JSON."""
    script = tmp_path / "show.py"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "json.dump({'argv': sys.argv[1:], 'stdin': sys.stdin.read(),\n"
        "           'env': {k: v for k, v in os.environ.items() if k.startswith(('SEED', 'RUN', 'LABEL'))}},\n"
        "          sys.stdout)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def run_job(spec: JobSpec, env: dict[str, str], stdin: str | None = None) -> dict:
    """Run a spec's command the way corral's executor does: in its workdir, with its environment."""
    result = subprocess.run(
        list(spec.command), cwd=spec.workdir, env={**spec.env, **env}, capture_output=True, text=True,
        timeout=30, stdin=subprocess.DEVNULL if stdin is None else None, input=stdin,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# -- realistic files ---------------------------------------------------------------------------


def test_gpu_tutorial_becomes_a_ten_task_array(tmp_path):
    request, warnings, spec = accepted(GPU_TUTORIAL, tmp_path)
    assert request == {
        "command": ["./train.sh", "--epochs", "90", "--data", "/data/imagenet"],
        "gpus": 1,
        "cpus": 4,
        "mem_mb": 8192,
        "stdout": "out.%A.%a",
        "stderr": "err.%A.%a",
        "array": "0-9",
        "export": "NONE",
        "user_log": "job.%A.log",
    }
    assert spec.array == "0-9" and spec.gpus == 1 and spec.cpus == 4 and spec.mem_mb == 8192
    assert spec.inherit_env is False
    assert spec.user_log == str(tmp_path / "job.%A.log")
    joined = "\n".join(warnings)
    for key in ("request_disk", "should_transfer_files", "when_to_transfer_output"):
        assert any(w.startswith(f"{key}:") for w in warnings), joined
    assert len(warnings) == 3


def test_single_job_process_is_zero_and_cluster_is_the_job_id(tmp_path):
    request, _, spec = accepted(CHTC_HELLO, tmp_path)
    assert request["command"] == ["./hello-chtc.sh", "0"]
    assert request["stdout"] == "hello-chtc_%j_0.out"
    assert request["stderr"] == "hello-chtc_%j_0.err"
    assert "array" not in request
    assert spec.array is None and spec.mem_mb == 1024


def test_plain_queue_is_one_job_and_queue_one_is_the_same(tmp_path):
    one, _, _ = accepted(submit(queue="queue"), tmp_path)
    also_one, _, _ = accepted(submit(queue="queue 1"), tmp_path)
    assert one == also_one
    assert "array" not in one and one["command"] == ["/bin/echo"]


def test_keys_are_case_insensitive_and_spacing_free(tmp_path):
    text = "Executable=/bin/echo\nREQUEST_GPUS   =2\n  Request_CPUs= 3\nArguments    =    a   b\nQueue 2\n"
    request, _, _ = accepted(text, tmp_path)
    assert request["gpus"] == 2 and request["cpus"] == 3
    assert request["command"] == ["/bin/echo", "a", "b"]
    assert request["array"] == "0-1"


def test_comments_and_line_continuations(tmp_path):
    text = (
        "# a comment\n"
        "   # an indented comment\n"
        "executable = /bin/echo\n"
        "arguments = --lr 0.1 \\\n"
        "            --epochs 5 \\\n"
        "            --tag a#b\n"
        "\n"
        "queue\n"
    )
    request, _, _ = accepted(text, tmp_path)
    # `#` starts a comment only at the start of a line, as in HTCondor
    assert request["command"] == ["/bin/echo", "--lr", "0.1", "--epochs", "5", "--tag", "a#b"]


def test_comments_never_continue_and_are_left_out_of_continued_lines(tmp_path):
    # the HTCondor manual: "A = $(B) \", "# $(C) \", "$(D)" gives A = $(B) $(D)
    text = (
        "executable = /bin/echo\n"
        "# arguments = commented out \\\n"
        "request_gpus = 1\n"
        "arguments = b \\\n"
        "# c \\\n"
        "d\n"
        "queue\n"
    )
    request, _, _ = accepted(text, tmp_path)
    assert request["command"] == ["/bin/echo", "b", "d"]
    assert request["gpus"] == 1


def test_multi_line_value(tmp_path):
    text = "executable = /bin/echo\narguments @=END\n  one\n  two\n@END\nqueue\n"
    request, _, _ = accepted(text, tmp_path)
    assert request["command"] == ["/bin/echo", "one", "two"]


def test_crlf_line_endings_are_read(tmp_path):
    request, _, _ = accepted("executable = /bin/echo\r\narguments = a\r\nqueue 3\r\n", tmp_path)
    assert request["command"] == ["/bin/echo", "a"] and request["array"] == "0-2"


# -- arguments, as the HTCondor manual gives them -------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    # old syntax: split on spaces; \" is a double quote; single quotes are plain characters
    ("one \\\"two\\\" 'three'", ["one", '"two"', "'three'"]),
    ("a\tb   c", ["a", "b", "c"]),
    ("C:\\path\\to x\\y", ["C:\\path\\to", "x\\y"]),
    # new syntax
    ('"3 simple arguments"', ["3", "simple", "arguments"]),
    ("\"one 'two with spaces' 3\"", ["one", "two with spaces", "3"]),
    ("\"one \"\"two\"\" 'spacey ''quoted'' argument'\"", ["one", '"two"', "spacey 'quoted' argument"]),
    ("\"a '' b\"", ["a", "", "b"]),
    ("\"back\\slash 'has no\\' meaning\"", ["back\\slash", "has no\\", "meaning"]),
    ("\"--opt='x y'z\"", ["--opt=x yz"]),
    ('""', []),
    ('"  "  ', []),
])
def test_argument_syntaxes(tmp_path, value, expected):
    assert argv_of(submit(f"arguments = {value}"), tmp_path) == expected


@pytest.mark.parametrize(("value", "message"), [
    ('one "two"', "unescaped double quote"),
    ('"one two', "never closed"),
    ('"one" two', "after the closing double quote"),
    ("\"one 'two\"", "unbalanced single quote"),
])
def test_bad_arguments_are_refused_naming_arguments(value, message):
    err = refused(submit(f"arguments = {value}"), "arguments")
    assert message in str(err)


# -- macros at run time: a real shell, real arguments ---------------------------------------------

HOSTILE = (
    "'a b' '$HOME' '`touch pwned`' ';touch pwned;' '\"\"quoted\"\"' 'it''s' '$(DOLLAR)(touch pwned)' "
    "'%s %%' '\\' '' 'x*' '$$'"
)
HOSTILE_ARGV = ["a b", "$HOME", "`touch pwned`", ";touch pwned;", '"quoted"', "it's", "$(touch pwned)",
                "%s %%", "\\", "", "x*", "$$"]


def test_process_in_arguments_reaches_the_job_as_its_task_number(tmp_path, argv_printer):
    text = submit(f'arguments = "--seed=$(Process) run_$(Cluster)_$(ProcId) {HOSTILE}"',
                  executable=str(argv_printer), queue="queue 5")
    request, _, spec = accepted(text, tmp_path)
    assert request["command"][:2] == ["/bin/sh", "-c"] and len(request["command"]) == 3
    assert request["name"] == "show.py"
    seen = run_job(spec, {"CORRAL_ARRAY_TASK_ID": "3", "CORRAL_ARRAY_JOB_ID": "41", "HOME": "/nowhere"})
    assert seen["argv"] == ["--seed=3", "run_41_3", *HOSTILE_ARGV]
    assert not (tmp_path / "pwned").exists()


def test_a_hostile_task_id_is_still_one_argument(tmp_path, argv_printer):
    text = submit("arguments = $(Process)", executable=str(argv_printer), queue="queue 2")
    _, _, spec = accepted(text, tmp_path)
    seen = run_job(spec, {"CORRAL_ARRAY_TASK_ID": "1; touch pwned", "CORRAL_ARRAY_JOB_ID": "9"})
    assert seen["argv"] == ["1; touch pwned"]
    assert not (tmp_path / "pwned").exists()


def test_old_syntax_arguments_with_process_run_for_real(tmp_path, argv_printer):
    text = submit("arguments = in_$(Process).dat \\\"q\\\" $x", executable=str(argv_printer), queue="queue 4")
    _, _, spec = accepted(text, tmp_path)
    seen = run_job(spec, {"CORRAL_ARRAY_TASK_ID": "3", "CORRAL_ARRAY_JOB_ID": "7"})
    assert seen["argv"] == ["in_3.dat", '"q"', "$x"]


def test_cluster_in_a_single_job_reads_the_job_id(tmp_path, argv_printer):
    text = submit("arguments = out.$(Cluster).$(Process)", executable=str(argv_printer))
    request, _, spec = accepted(text, tmp_path)
    assert "CORRAL_ARRAY" not in request["command"][2]
    seen = run_job(spec, {"CORRAL_JOB_ID": "123"})
    assert seen["argv"] == ["out.123.0"]


def test_without_run_time_macros_the_command_is_the_plain_argv(tmp_path):
    request, _, _ = accepted(submit('arguments = "a $HOME `x` \'b c\'"', queue="queue 3"), tmp_path)
    assert request["command"] == ["/bin/echo", "a", "$HOME", "`x`", "b c"]
    assert "name" not in request


# -- environment ---------------------------------------------------------------------------------


def test_environment_new_syntax_from_the_manual(tmp_path):
    text = submit("environment = \"one=1 two=\"\"2\"\" three='spacey ''quoted'' value'\"")
    request, _, spec = accepted(text, tmp_path)
    assert request["env"] == {"one": "1", "two": '"2"', "three": "spacey 'quoted' value"}
    assert spec.env["three"] == "spacey 'quoted' value"


def test_environment_old_syntax_from_the_manual(tmp_path):
    text = submit("environment = one=1;two=2;three=\"quotes have no 'special' meaning\"")
    request, _, _ = accepted(text, tmp_path)
    assert request["env"] == {"one": "1", "two": "2", "three": "\"quotes have no 'special' meaning\""}


def test_environment_with_process_is_set_at_run_time(tmp_path, argv_printer):
    text = submit(
        "environment = \"SEED=$(Process) RUN='run $(Cluster)' LABEL='$HOME `x`'\"",
        executable=str(argv_printer), queue="queue 8",
    )
    request, _, spec = accepted(text, tmp_path)
    assert request["env"] == {"LABEL": "$HOME `x`"}
    seen = run_job(spec, {"CORRAL_ARRAY_TASK_ID": "3", "CORRAL_ARRAY_JOB_ID": "55"})
    assert seen["env"] == {"SEED": "3", "RUN": "run 55", "LABEL": "$HOME `x`"}
    assert seen["argv"] == []


@pytest.mark.parametrize("value", ['"1BAD=x"', '"NOEQUALS"', "A=1;B-C=2"])
def test_bad_environment_is_refused(value):
    refused(submit(f"environment = {value}"), "environment")


@pytest.mark.parametrize(("value", "export"), [
    ("True", "ALL"), ("true", "ALL"), ("False", "NONE"), ("PATH, HOME", "NONE,PATH,HOME"),
])
def test_getenv_sets_what_the_job_inherits(tmp_path, value, export):
    request, _, _ = accepted(submit(f"getenv = {value}"), tmp_path)
    assert request["export"] == export


def test_without_getenv_the_job_gets_no_submit_environment_as_in_htcondor(tmp_path):
    request, _, spec = accepted(submit(), tmp_path)
    assert request["export"] == "NONE" and spec.inherit_env is False


def test_getenv_patterns_are_refused():
    refused(submit("getenv = CUDA*"), "getenv")


# -- resources -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "mb"), [
    ("4096", 4096), ("4GB", 4096), ("4G", 4096), ("4096M", 4096), ("4096MB", 4096), ("4 GB", 4096),
    ("1T", 1024 * 1024), ("2048K", 2), ("1.5G", 1536), ("4gb", 4096),
])
def test_request_memory_is_megabytes_unless_a_unit_says_otherwise(tmp_path, value, mb):
    request, _, spec = accepted(submit(f"request_memory = {value}"), tmp_path)
    assert request["mem_mb"] == mb and spec.mem_mb == mb


@pytest.mark.parametrize(("line", "field"), [
    ("request_memory = lots", "request_memory"),
    ("request_memory = MemoryUsage * 2", "request_memory"),
    ("request_cpus = 0", "request_cpus"),
    ("request_cpus = 2.5", "request_cpus"),
    ("request_gpus = one", "request_gpus"),
    ("request_gpus = -1", "request_gpus"),
])
def test_bad_resource_requests_name_the_key(line, field):
    refused(submit(line), field)


def test_gpu_memory_and_runtime_limit(tmp_path):
    text = submit("request_gpus = 2", "gpus_minimum_memory = 40G", "allowed_execute_duration = 3600")
    request, _, spec = accepted(text, tmp_path)
    assert spec.gpus == 2 and spec.gpu_mem_mb == 40 * 1024 and spec.time_limit_s == 3600
    assert request["time_limit_s"] == 3600


# -- files and directories -------------------------------------------------------------------------


def test_output_only_sends_stderr_to_dev_null_as_htcondor_does(tmp_path):
    request, _, spec = accepted(submit("output = run.out"), tmp_path)
    assert request["stdout"] == "run.out" and request["stderr"] == "/dev/null"
    assert spec.stderr == "/dev/null"


def test_no_output_keeps_corrals_own_logs(tmp_path):
    request, _, spec = accepted(submit(), tmp_path)
    assert "stdout" not in request and spec.stdout == "/tmp/%j.out"


def test_percent_in_an_output_path_is_literal(tmp_path):
    request, _, _ = accepted(submit("output = 100%_$(Process).out", "error = ~x.err", queue="queue 2"), tmp_path)
    assert request["stdout"] == "100%%_%a.out"
    assert request["stderr"] == "./~x.err"


def test_initialdir_is_the_workdir_and_the_relative_executable_still_comes_from_the_submit_dir(
    tmp_path, argv_printer
):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    text = "\n".join([
        "initialdir = runs/a", "executable = show.py", "arguments = $(Process)", "queue 2", "",
    ])
    request, _, spec = accepted(text, tmp_path)
    assert request["workdir"] == "runs/a"
    assert spec.workdir == str(tmp_path / "runs" / "a")
    seen = run_job(spec, {"CORRAL_ARRAY_TASK_ID": "1", "CORRAL_ARRAY_JOB_ID": "2"})
    assert seen["argv"] == ["1"]


def test_relative_executable_runs_from_the_submit_dir_without_initialdir(tmp_path, argv_printer):
    request, _, spec = accepted("executable = show.py\narguments = x\nqueue\n", tmp_path)
    assert request["command"] == ["./show.py", "x"]
    assert run_job(spec, {})["argv"] == ["x"]


def test_relative_executable_with_absolute_initialdir_is_refused(tmp_path):
    err = refused(f"initialdir = {tmp_path}\nexecutable = show.py\nqueue\n", "executable")
    assert "absolute path" in str(err)


def test_initialdir_with_process_is_refused():
    err = refused(submit("initialdir = run_$(Process)", queue="queue 3"), "initialdir")
    assert "$(Process)" in str(err)


def test_input_feeds_stdin_per_task(tmp_path, argv_printer):
    (tmp_path / "in.2.txt").write_text("task two's input\n")
    text = submit("input = in.$(Process).txt", executable=str(argv_printer), queue="queue 3")
    _, _, spec = accepted(text, tmp_path)
    assert run_job(spec, {"CORRAL_ARRAY_TASK_ID": "2", "CORRAL_ARRAY_JOB_ID": "5"})["stdin"] == "task two's input\n"


# -- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "name"), [
    ("batch_name = resnet sweep", "resnet sweep"),
    ('+JobBatchName = "resnet \\"v2\\""', 'resnet "v2"'),
    ('MY.JobBatchName = "nightly"', "nightly"),
])
def test_batch_name_is_the_name(tmp_path, line, name):
    request, warnings, spec = accepted(submit(line), tmp_path)
    assert request["name"] == name and spec.name == name
    assert warnings == []


# -- macros defined in the file --------------------------------------------------------------------


def test_file_macros_expand_recursively_and_with_defaults(tmp_path):
    text = submit(
        "dataset = imagenet",
        "root = /data/$(dataset)",
        "arguments = --data $(root) --split $(split:train) $(DOLLAR)HOME",
        "Arguments = $(arguments) --fast",
    )
    request, warnings, _ = accepted(text, tmp_path)
    assert request["command"] == ["/bin/echo", "--data", "/data/imagenet", "--split", "train", "$HOME", "--fast"]
    assert warnings == []  # dataset and root are used, so no "typo?" warning


def test_unknown_macro_is_refused_naming_it():
    err = refused(submit("arguments = $(Nope)"), "arguments")
    assert "$(Nope)" in str(err)


def test_macro_cycle_is_refused():
    err = refused(submit("a = $(b)", "b = $(a)", "arguments = $(a)"), "arguments")
    assert "refers to itself" in str(err)


@pytest.mark.parametrize("value", ["$ENV(HOME)", "$$(Memory)", "$RANDOM_CHOICE(1,2)", "$Fn(x.txt)"])
def test_submit_time_and_match_time_macros_are_refused(value):
    refused(submit(f"arguments = {value}"), "arguments")


def test_unknown_unused_keys_are_warned_like_htcondor_does(tmp_path):
    _, warnings, _ = accepted(submit("reqest_gpus = 1"), tmp_path)
    assert warnings == [
        "reqest_gpus: not a submit command corral knows, and nothing refers to it; ignored (a typo?)"
    ]


# -- what is refused -------------------------------------------------------------------------------


@pytest.mark.parametrize("universe", ["docker", "parallel", "java", "scheduler", "Local"])
def test_other_universes_are_refused_naming_them(universe):
    err = refused(submit(f"universe = {universe}"), "universe")
    assert universe.lower() in str(err)


@pytest.mark.parametrize(("line", "field"), [
    ("requirements = (OpSysAndVer == \"AlmaLinux9\")", "requirements"),
    ("transfer_input_files = data.csv, model.pt", "transfer_input_files"),
    ("Transfer_Input_Files = data.csv", "Transfer_Input_Files"),
    ("periodic_remove = (time() - EnteredCurrentStatus) > 3600", "periodic_remove"),
    ("max_retries = 3", "max_retries"),
    ('require_gpus = regexp("A100", DeviceName)', "require_gpus"),
    ("requirements = HasCHTCStaging == true", "requirements"),
    ("gpus_minimum_capability = Capability", "gpus_minimum_capability"),
    ("gpus_minimum_runtime = 12.0", "gpus_minimum_runtime"),
    ("docker_image = pytorch/pytorch", "docker_image"),
    ('+SingularityImage = "/cvmfs/img.sif"', "+SingularityImage"),
    ("request_fpgas = 1", "request_fpgas"),
    ("cron_minute = 5", "cron_minute"),
])
def test_commands_that_change_how_the_job_runs_are_refused(line, field):
    refused(submit(line), field)


@pytest.mark.parametrize(("queue", "word"), [
    ("queue name from names.txt", "from"),
    ("queue infile matching *.dat", "matching"),
])
def test_queue_over_files_is_left_to_the_cli_naming_the_form(queue, word):
    err = refused(submit(queue=queue), "queue")
    assert f"queue ... {word}" in str(err) and "corral CLI" in str(err)


def test_queue_mistakes_are_refused():
    refused(submit(queue="queue 0"), "queue")
    refused(submit(queue="queue 2\nqueue 3"), "queue")
    refused("executable = /bin/echo\n", "queue")
    refused("arguments = x\nqueue\n", "executable")
    refused(submit(queue="queue many"), "queue")
    refused(submit(queue="queue 100001"), "queue")
    refused(submit("include : common.sub"), "include")
    refused(submit("just some words"), "line 2")


def test_queue_count_may_come_from_a_macro(tmp_path):
    request, warnings, _ = accepted(submit("runs = 4", queue="queue $(runs)"), tmp_path)
    assert request["array"] == "0-3"
    assert warnings == []


def test_a_macro_used_only_by_an_ignored_command_is_no_typo(tmp_path):
    _, warnings, _ = accepted(submit("logdir = logs", "description = $(logdir) run"), tmp_path)
    assert len(warnings) == 1 and warnings[0].startswith("description: ignored")


def test_commands_after_queue_are_warned_and_ignored(tmp_path):
    request, warnings, _ = accepted(submit(queue="queue 2\nrequest_gpus = 8"), tmp_path)
    assert "gpus" not in request
    assert warnings == ["line 3: request_gpus comes after the queue statement, so no job has it; ignored"]


@pytest.mark.parametrize("line", ["+ProjectName = \"ml\"", "notification = Complete", "notify_user = a@b.c",
                                  "priority = 5", "stream_output = True"])
def test_harmless_commands_are_warned(tmp_path, line):
    request, warnings, _ = accepted(submit(line), tmp_path)
    assert request["command"] == ["/bin/echo"]
    assert len(warnings) == 1 and warnings[0].startswith(line.split(" =")[0] + ": ignored")


def test_cluster_macro_in_resources_is_refused():
    refused(submit("request_cpus = $(Cluster)"), "request_cpus")


def test_private_use_placeholders_in_the_file_are_refused():
    refused(submit("arguments = \ue000"), "submit file")


def test_the_sh_wrapper_execs_so_the_job_is_the_process_corral_watches(tmp_path):
    request, _, _ = accepted(submit("arguments = $(Process)", queue="queue 2"), tmp_path)
    assert request["command"][2].splitlines()[-1].startswith("exec /bin/echo ")
    assert os.path.basename(request["command"][0]) == "sh"


# -- GPU selectors, queue over items, the event log ----------------------------------------------


def test_chtc_gpu_selectors_become_one_requirements_expression(tmp_path):
    request, warnings, spec = accepted(submit(
        "request_gpus = 1", 'requirements = (OpSys == "LINUX") && (CUDACapability >= 7.0)',
        "require_gpus = (GlobalMemoryMb >= 20000)", "gpus_minimum_capability = 8.0", "gpus_maximum_capability = 9.0",
        "gpus_minimum_memory = 20G", "+WantGPULab = true",
    ), tmp_path)
    assert request["requirements"] == (
        '((OpSys == "LINUX") && (CUDACapability >= 7.0)) && ((GlobalMemoryMb >= 20000)) '
        "&& (Capability >= 8.0) && (Capability <= 9.0)"
    )
    assert spec.requirements == request["requirements"] and spec.gpu_mem_mb == 20 * 1024
    assert warnings == ["+WantGPULab: ignored; corral keeps no job ClassAd for custom attributes"]


def test_gpu_requirements_without_gpus_are_refused(tmp_path):
    request, _ = condor_request(submit("requirements = CUDACapability >= 8.0"), max_tasks=MAX_TASKS)
    with pytest.raises(InvalidRequest, match="asks for no GPU"):
        build_spec(request, user="u", log_dir="/tmp", default_workdir=str(tmp_path), server_env={})
    _, _, spec = accepted(submit('requirements = OpSys == "LINUX"'), tmp_path)  # a node-only one is fine
    assert spec.requirements == '(OpSys == "LINUX")'


def test_a_plain_capability_number_is_no_expression_error():
    err = refused(submit("request_gpus = 1", "gpus_minimum_capability = new"), "gpus_minimum_capability")
    assert "compute capability such as 7.0" in str(err)


def test_queue_in_makes_an_array_whose_tasks_see_their_item(tmp_path, argv_printer):
    text = submit("arguments = $(Process) $(Step) $(ItemIndex) $(lr)", "environment = \"LABEL=run-$(lr)\"",
                  executable=str(argv_printer), queue="queue 2 lr in (0.1, 1e-3 x)")
    request, _, spec = accepted(text, tmp_path)
    assert request["array"] == "0-5"
    seen = [run_job(spec, {"CORRAL_ARRAY_TASK_ID": str(t), "CORRAL_ARRAY_JOB_ID": "9"}) for t in range(6)]
    assert [s["argv"][:3] for s in seen] == [[str(t), str(t % 2), str(t // 2)] for t in range(6)]
    assert [s["argv"][3] for s in seen] == ["0.1", "0.1", "1e-3", "1e-3", "x", "x"]
    assert seen[2]["env"] == {"LABEL": "run-1e-3"}


def test_queue_from_splits_rows_the_last_variable_taking_the_rest(tmp_path, argv_printer):
    text = submit("arguments = \"$(a) '$(b)'\"", executable=str(argv_printer),
                  queue="queue a, b from (\n  x, one two\n# a comment\n  y  $(DOLLAR)HOME; rm -rf /\n)")
    _, _, spec = accepted(text, tmp_path)
    seen = [run_job(spec, {"CORRAL_ARRAY_TASK_ID": str(t)})["argv"] for t in range(2)]
    assert seen == [["x", "one two"], ["y", "$HOME; rm -rf /"]]  # values are data, never shell code


def test_queue_slices_and_a_single_item_is_a_plain_job(tmp_path):
    request, _, _ = accepted(submit("arguments = $(x)", queue="queue x in [1:3] (a b c d)"), tmp_path)
    assert request["array"] == "0-1" and "b" in request["command"][2] and "d" not in request["command"][2]
    request, _, _ = accepted(submit("arguments = $(Item)", "output = $(Item).out", queue="queue in (only)"), tmp_path)
    assert request["command"] == ["/bin/echo", "only"] and request["stdout"] == "only.out"


def test_an_item_in_output_is_opened_by_the_wrapper(tmp_path, argv_printer):
    text = submit("arguments = $(n)", "output = out_$(n).json", executable=str(argv_printer),
                  queue="queue n in (a, b)")
    request, _, spec = accepted(text, tmp_path)
    assert "stdout" not in request  # corral keeps its own log; the job's output goes where the file says
    for task in (0, 1):
        subprocess.run(list(spec.command), cwd=spec.workdir, env={"CORRAL_ARRAY_TASK_ID": str(task)}, check=True,
                       stdin=subprocess.DEVNULL)
    assert json.loads((tmp_path / "out_b.json").read_text())["argv"] == ["b"]


@pytest.mark.parametrize(("queue", "message"), [
    ("queue x in", "empty"),
    ("queue x from (\n)", "empty"),
    ("queue x from (\na", "never ends"),
    ("queue 2 x, y in (a b)", "one variable"),
    ("queue x in [0:2:0] (a b)", "step of 0"),
    ("queue 1-x in (a)", "not a variable name"),
])
def test_queue_item_mistakes_are_refused(queue, message):
    assert message in str(refused(submit(queue=queue), "queue"))


def test_a_sweep_too_large_for_one_command_is_refused_with_a_way_out():
    rows = "\n".join(f"{i}, {'x' * 60}" for i in range(2000))
    err = refused(submit("arguments = $(a) $(b)", queue=f"queue a, b from (\n{rows}\n)"), "queue")
    assert "corral takes up to 64 KB" in str(err) and "split the sweep" in str(err)


def test_an_item_where_one_value_serves_every_task_is_refused():
    refused(submit("request_cpus = $(n)", queue="queue n in (1, 2)"), "request_cpus")
    refused(submit("log = $(n).log", queue="queue n in (1, 2)"), "log")


def test_resolve_queue_lists_files_and_matches_for_the_server():
    from corral.core.dialects.htcondor_submit_file import resolve_queue

    asked = []

    def listing(patterns, kind):
        asked.append((patterns, kind))
        return ["a.csv", "b c.csv"]

    text = resolve_queue(submit(queue="queue f matching dirs [1:] *.csv, *.tsv") + "x = 1\n", lambda n: "", listing)
    assert asked == [(["*.csv", "*.tsv"], "dirs")]
    assert text.endswith("queue f from [1:] (\na.csv\nb c.csv\n)\nx = 1\n")
    read = resolve_queue(submit(queue="queue a, b from params.txt"), lambda n: f"1 2\n# {n}\n", listing)
    assert "queue a, b from (\n1 2\n# params.txt\n\n)" in read
    inline = submit(queue="queue a in (1 2)")
    assert resolve_queue(inline, lambda n: 1 / 0, listing) == inline


def test_log_becomes_the_event_log_pattern_with_the_cluster(tmp_path):
    request, warnings, spec = accepted(submit("log = logs/job_$(Cluster).log", queue="queue 3"), tmp_path)
    assert request["user_log"] == "logs/job_%A.log" and warnings == []
    assert spec.user_log == str(tmp_path / "logs" / "job_%A.log")
    assert "corral writes one log" in str(refused(submit("log = job_$(Process).log", queue="queue 2"), "log"))
