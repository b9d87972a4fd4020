"""sbatch and scancel on a real corral server, run as a Slurm user runs them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from corral.cli.slurm.install import COMMANDS


def test_slurm_path_holds_each_command_in_a_directory_only_its_owner_may_change(slurm_path):
    info = os.stat(slurm_path)
    assert not info.st_mode & 0o022 and info.st_uid == os.geteuid()
    for name in COMMANDS:
        assert os.access(os.path.join(slurm_path, name), os.X_OK)
    found = subprocess.run(["bash", "-c", "command -v sbatch"], capture_output=True, text=True,
                           env={**os.environ, "PATH": f"{slurm_path}:{os.environ['PATH']}"})
    assert found.stdout.strip() == os.path.join(slurm_path, "sbatch")


def test_slurm_path_refuses_a_directory_others_may_write(tmp_path):
    from corral.cli.slurm import install

    shared = tmp_path / "bin"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(PermissionError, match="only its owner"):
        install.write_scripts(str(shared))
    assert not os.listdir(shared)


def test_sbatch_submits_prints_slurms_line_and_parsable_prints_the_id(server_factory, slurm_shell):
    server = server_factory()
    shell = slurm_shell(server.home)
    out = shell('sbatch --wrap "true"; sbatch --parsable --wrap "true"')
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first.startswith("Submitted batch job ") and first.split()[-1].isdigit()
    assert second == str(int(first.split()[-1]) + 1)
    job = server.client().get(second)
    assert job["name"] == "wrap" and job["user"] == server.client().whoami()["user"]


def test_sbatch_reads_the_script_from_a_file_with_its_arguments_or_from_stdin(server_factory, slurm_shell, tmp_path):
    server = server_factory()
    script = tmp_path / "prep.sh"
    script.write_text("#!/bin/bash\necho \"args: $@\"\n")
    shell = slurm_shell(server.home)
    out = shell(f"sbatch --parsable {script} one two && printf '#!/bin/sh\\necho piped\\n' | sbatch --parsable",
                cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    from_file, from_stdin = out.stdout.split()
    client = server.client()
    assert client.wait(from_file, timeout=60)["state"] == "COMPLETED"
    assert client.wait(from_stdin, timeout=60)["state"] == "COMPLETED"
    assert client.logs(from_file)[0] == b"args: one two\n"
    assert client.logs(from_stdin)[0] == b"piped\n"
    assert client.get(from_file)["name"] == "prep.sh"


def test_sbatch_fails_as_slurm_does_and_submits_nothing(server_factory, slurm_shell, tmp_path):
    server = server_factory()
    shell = slurm_shell(server.home)
    unknown = shell('sbatch --bogus=1 --wrap "true"')
    assert (unknown.returncode, unknown.stderr) == (
        255, "sbatch: unrecognized option '--bogus=1'\nTry \"sbatch --help\" for more information\n")
    assert shell("sbatch --part").stderr.startswith("sbatch: option '--partition' requires an argument\n")
    missing = shell("sbatch /nonexistent/job.sh")
    assert (missing.returncode, missing.stderr) == (1, "sbatch: error: Unable to open file /nonexistent/job.sh\n")
    (tmp_path / "plain.sh").write_text("echo no interpreter line\n")
    no_shebang = shell(f"sbatch {tmp_path}/plain.sh")
    assert no_shebang.returncode == 1
    assert no_shebang.stderr.startswith("sbatch: error: Batch job submission failed: ")
    assert "#!" in no_shebang.stderr
    assert server.client().queue() == [] and server.client().history() == []


def test_sbatch_wait_exits_with_the_jobs_exit_status(server_factory, slurm_shell):
    server = server_factory()
    out = slurm_shell(server.home)('sbatch --wait --wrap "exit 3"')
    assert out.returncode == 3
    assert out.stdout.startswith("Submitted batch job ")


def test_scancel_cancels_jobs_tasks_and_filtered_jobs_and_names_a_missing_one(server_factory, slurm_shell):
    server = server_factory(gpus=1)
    client = server.client()
    shell = slurm_shell(server.home)
    blocker = client.submit(["sleep", "300"], gpus=1)
    array = client.submit(["sleep", "300"], gpus=1, array="0-5")
    other = client.submit(["sleep", "300"], gpus=1, name="keep")
    out = shell(f"scancel {array['id']}_[1-2] {array['id']}_4")
    assert out.returncode == 0, out.stderr
    answer = client.array_tasks(array["id"])
    assert {t["array_task_id"] for t in answer["tasks"] if t["state"] == "CANCELLED"} == {1, 2, 4}
    assert answer["summary"]["states"] == {"CANCELLED": 3, "PENDING": 3}
    out = shell("scancel -t PD -n keep")
    assert out.returncode == 0, out.stderr
    assert client.get(other["id"])["state"] == "CANCELLED"
    assert client.get(blocker["id"])["state"] == "RUNNING"
    out = shell(f"scancel 99999 {blocker['id']}")  # as Slurm 22.05: a missing job is no failure, told of with -v
    assert (out.returncode, out.stderr) == (0, "")
    assert client.wait(blocker["id"], timeout=30)["state"] == "CANCELLED"
    out = shell("scancel -v 99999")
    assert (out.returncode, out.stderr) == (0, "scancel: error: Kill job error on job id 99999: Invalid job id specified\n")
    assert shell("scancel").stderr == "scancel: error: No job identification provided\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_imports_nothing_heavy(command):
    """The commands start within twice the interpreter's own start: none of these on their path."""
    heavy = {"typing", "dataclasses", "http.client", "ssl", "email", "click", "pydantic", "sqlalchemy", "datetime",
             "corral.client", "urllib"}
    # Slurm's time forms and durations (`time`, `math`), and the packages that hold them (docstrings alone)
    light_core = {"corral.core", "corral.core.units", "corral.core.units.slurm_times", "corral.core.units.units"}
    out = subprocess.run([sys.executable, "-S", "-X", "importtime", "-c", f"import corral.cli.slurm.{command}"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": _src()}, check=True)
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert not {name for name in imported if name in heavy or name.split(".")[0] in heavy - {"corral"}
                or name.startswith(tuple(h + "." for h in heavy))
                or (name.startswith("corral.core") and name not in light_core)}


def _src() -> str:
    import corral

    return os.path.dirname(os.path.dirname(corral.__file__))


def test_sbatch_reads_the_script_then_sbatch_variables_then_its_command_line(server_factory, slurm_shell, tmp_path):
    server = server_factory()
    (tmp_path / "job.sh").write_text("#!/bin/bash\n#SBATCH -J from-script\n#SBATCH --mem=1G\n#SBATCH -t 10\ntrue\n")
    shell = slurm_shell(server.home)
    ids = shell("sbatch --parsable job.sh; SBATCH_JOB_NAME=from-env SBATCH_TIMELIMIT=20 sbatch --parsable job.sh; "
                "SBATCH_JOB_NAME=from-env sbatch --parsable -J from-cli --mem=2G job.sh", cwd=str(tmp_path))
    assert ids.returncode == 0, ids.stderr
    client = server.client()
    jobs = [client.get(job_id) for job_id in ids.stdout.split()]
    assert [(j["name"], j["mem_mb"], j["time_limit_s"]) for j in jobs] == [
        ("from-script", 1024, 600), ("from-env", 1024, 1200), ("from-cli", 2048, 600)]


def test_sbatch_refuses_an_option_corral_cannot_honour_by_name_and_submits_nothing(server_factory, slurm_shell):
    server = server_factory()
    out = slurm_shell(server.home)('sbatch --contiguous --wrap "true"')
    assert out.returncode == 1
    assert out.stderr.startswith("sbatch: error: Batch job submission failed: ") and "--contiguous" in out.stderr
    assert server.client().queue() == [] and server.client().history() == []


def test_an_interpreter_other_accounts_cannot_run_is_named():
    from corral.cli.slurm.install import closed_to_others

    base = tempfile.mkdtemp(dir="/tmp")
    try:
        os.chmod(base, 0o755)
        private = os.path.join(base, "private")
        os.mkdir(private, 0o700)
        python = os.path.join(private, "python3")
        with open(python, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(python, 0o755)
        assert closed_to_others(python, root=base) == private
        os.chmod(private, 0o755)
        assert closed_to_others(python, root=base) is None
        os.chmod(python, 0o700)
        assert closed_to_others(python, root=base) == python
        # a virtualenv under a private home: its bin/python links to an open interpreter, but the link's
        # directory is closed, and the commands' first line names the link
        os.chmod(python, 0o755)
        venv = os.path.join(base, "home", "venv", "bin")
        os.makedirs(venv)
        os.symlink(python, os.path.join(venv, "python"))
        os.chmod(os.path.join(base, "home"), 0o700)
        assert closed_to_others(os.path.join(venv, "python"), root=base) == os.path.join(base, "home")
        # corral's own directory must be listed too (read), not only entered
        os.chmod(os.path.join(base, "home"), 0o755)
        os.chmod(base, 0o711)
        assert closed_to_others(os.path.join(venv, "python"), root=base) == base
    finally:
        shutil.rmtree(base)
