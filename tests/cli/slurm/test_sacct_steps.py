"""sacct -j JOBID.STEP on a real corral server, as Slurm 22.05 answers it (captured on the testbed):
the step's own line, nothing for a step that is not there, the job's line with -X."""

from __future__ import annotations


def test_a_step_selects_its_own_line_and_a_missing_step_prints_nothing(server_factory, slurm_shell):
    server = server_factory()
    shell = slurm_shell(server.home)
    client = server.client()
    job = client.submit(["sh", "-c", "exit 3"])["id"]
    assert client.wait(job, timeout=60)["state"] == "FAILED"
    out = shell(f"sacct -j {job}.batch -P -o JobID,JobName,State")
    assert (out.returncode, out.stdout) == (0, f"JobID|JobName|State\n{job}.batch|batch|FAILED\n"), out.stderr
    # corral keeps no numbered (srun) steps: Slurm prints nothing, and succeeds, for a step it has not
    for step in ("0", "9", "extern"):
        out = shell(f"sacct -j {job}.{step} --format=Reason --noheader")
        assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    out = shell(f"sacct -X -j {job}.0,{job}.batch -P -n -o JobID,State")
    assert out.stdout == f"{job}|FAILED\n"
    out = shell(f"sacct -j {job}.batch,{job} -P -n -o JobID")
    assert out.stdout == f"{job}\n{job}.batch\n"
    out = shell(f"sacct -j {job}.x")
    assert (out.returncode, out.stderr) == (1, f"sacct: Bad step specified: {job}.x\n")


def test_scancel_takes_the_clusters_option_of_one_cluster(server_factory, slurm_shell):
    server = server_factory()
    client = server.client()
    job = client.submit(["sleep", "300"])["id"]
    out = slurm_shell(server.home)(f"scancel {job} --clusters=all")  # what snakemake's plugin sends
    assert (out.returncode, out.stderr) == (0, "")
    assert client.wait(job, timeout=30)["state"] == "CANCELLED"
