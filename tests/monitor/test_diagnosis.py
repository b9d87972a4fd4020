"""`corral diagnose`: each cause found from realistic evidence, cited, ordered, and nothing for a healthy job."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from corral.cli.format_monitoring import format_diagnosis
from corral.monitor.diagnosis import CRITICAL, WARNING, Evidence, Finding, diagnose, unchecked, warning_lead_s
from corral.monitor.efficiency import local_efficiency
from corral.monitor.usage import job_usage
from corral.core.monitoring.samples import summarize

DATA = Path(__file__).parent / "data"
T0 = 1_718_000_000.0


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def job(**changes: Any) -> dict[str, Any]:
    """A GPU training job as the API shows it."""
    view = {"id": 12, "ref": "12", "name": "train", "user": "alice", "state": "COMPLETED", "exit_code": 0,
            "signal": None, "reason": None, "gpus": 2, "gpu_type": "A100", "gpu_mem_mb": None, "cpus": 4,
            "mem_mb": 16384, "time_limit_s": 3600, "node": "gpu-node-03", "workdir": "/home/alice/gpt",
            "submit_time": iso(T0 - 60), "start_time": iso(T0), "end_time": iso(T0 + 2000), "restarts": 0}
    view.update(changes)
    return view


def failed(**changes: Any) -> dict[str, Any]:
    changes.setdefault("exit_code", 1)
    return job(state="FAILED", **changes)


def samples(n: int = 45, *, gpu: float | None = 85.0, cpu: float = 60.0, gpu_mem: float | None = 30000.0,
            rss: float = 6000.0, start: float = T0 + 30) -> list[dict[str, Any]]:
    """Rows every 10 s with the jitter real readings have; the jitter averages out over multiples of 5."""
    rows = []
    for i in range(n):
        jitter = (i % 5) - 2
        rows.append({
            "time": start + 10 * i,
            "gpu_utilization": None if gpu is None else gpu + 2 * jitter if gpu else 0.0,
            "gpu_memory_mb": gpu_mem, "gpu_power_w": None if gpu is None else 120 + 3 * gpu,
            "gpu_temperature_c": None if gpu is None else 55.0, "cpu_utilization": cpu + jitter,
            "cpu_time_s": 4 * cpu / 100 * 10 * (i + 1), "rss_mb": rss + 10 * jitter,
            "read_mb_s": 40.0, "write_mb_s": 0.5, "processes": 5,
        })
    return rows


def log(name: str, stream: str = "stderr") -> list[tuple[str, int, str]]:
    text = (DATA / name).read_text()
    return [(stream, n, line) for n, line in enumerate(text.splitlines(), 1)]


def evidence(job_view: dict[str, Any], rows: list[dict[str, Any]] | None = None, lines=(), **more: Any) -> Evidence:
    return Evidence(job=job_view, summary=summarize(rows) if rows else None, log_lines=list(lines),
                    nonfinite=more.pop("nonfinite", ()), checkpoints=more.pop("checkpoints", 0), **more)


def causes(findings: list[Finding]) -> list[str]:
    return [f.cause for f in findings]


def only(findings: list[Finding], cause: str) -> Finding:
    matching = [f for f in findings if f.cause == cause]
    assert len(matching) == 1, causes(findings)
    return matching[0]


HEALTHY_STDOUT = [("stdout", n, f"iter {10 * n}: loss {3.5 - n / 100:.4f}, time 411.20ms, mfu 38.20%")
                  for n in range(1, 200)]


# -- healthy ---------------------------------------------------------------------------------------


def test_a_healthy_finished_job_has_no_findings():
    assert diagnose(evidence(job(), samples(), HEALTHY_STDOUT, checkpoints=2)) == []


def test_a_healthy_running_job_has_no_findings():
    now = T0 + 600
    ev = evidence(job(state="RUNNING", exit_code=None, end_time=None), samples(), HEALTHY_STDOUT,
                  last_steps=[("gpt2", "train/loss", 1990, now - 20)], log_mtime=now - 5, now=now)
    assert diagnose(ev) == []


def test_no_findings_says_so_and_what_was_checked():
    text = format_diagnosis(job(), [])
    assert text.startswith("Job 12 (train), COMPLETED: no problem found.")
    assert "Checked:" in text and "CUDA" in text and "NaN" in text and "time limit" in text


# -- GPUs starved or idle --------------------------------------------------------------------------


def test_low_gpu_with_saturated_cpu_is_data_loading():
    findings = diagnose(evidence(job(), samples(gpu=12.0, cpu=97.0), HEALTHY_STDOUT, checkpoints=1))
    assert causes(findings) == ["data_loading"]
    finding = findings[0]
    assert finding.severity == WARNING and finding.title == "Data loading starves the GPUs"
    assert finding.evidence == ("GPU utilization averaged 12% over 45 samples across 7 min (below 30% in 100% of them) "
                                "while CPU ran at 97% of 4 cores",)
    fixes = " ".join(finding.fixes)
    assert "num_workers=3" in fixes and "pin_memory=True" in fixes and "-c 8" in fixes
    assert "local" in fixes and "offline" in fixes


def test_low_gpu_with_idle_cpu_is_a_different_finding():
    findings = diagnose(evidence(job(), samples(gpu=12.0, cpu=20.0, gpu_mem=4000.0), HEALTHY_STDOUT))
    assert causes(findings) == ["gpu_idle"]
    assert "while CPU ran at only 20% of 4 cores" in findings[0].evidence[0]
    assert "GPU memory peaked at 3.9 GB" in findings[0].evidence
    assert any("batch size" in fix for fix in findings[0].fixes)


def test_no_gpu_finding_without_gpu_samples():
    cpu_job = job(gpus=0, gpu_type=None)
    assert diagnose(evidence(cpu_job, samples(gpu=None, gpu_mem=None, cpu=99.0), HEALTHY_STDOUT)) == []
    # GPUs requested but no GPU readings (NVML absent): nothing is claimed about them either
    assert diagnose(evidence(job(), samples(gpu=None, gpu_mem=None, cpu=99.0), HEALTHY_STDOUT)) == []


def test_a_few_minutes_of_samples_say_nothing_about_gpu_use():
    # 4 min of start-up (loading data, compiling) look like idle GPUs; that is not a finding yet
    assert diagnose(evidence(job(), samples(n=25, gpu=5.0, cpu=99.0), HEALTHY_STDOUT)) == []


def test_gpus_never_touched_are_reported_instead_of_idle():
    findings = diagnose(evidence(job(), samples(n=60, gpu=0.0, gpu_mem=0.0, cpu=100.0), HEALTHY_STDOUT))
    assert causes(findings) == ["gpus_unused"]
    assert findings[0].evidence == ("2 GPUs allocated; over 60 samples across 10 min their utilization never rose "
                                    "above 0% and no GPU memory was in use",)
    assert any("CUDA_VISIBLE_DEVICES" in fix for fix in findings[0].fixes)
    assert any(".to('cuda')" in fix for fix in findings[0].fixes)


def test_a_job_that_crashed_before_reaching_its_gpus_is_not_called_gpu_unused():
    lines = [("stderr", 1, "Traceback (most recent call last):"),
             ("stderr", 2, '  File "/home/alice/gpt/train.py", line 3, in <module>'),
             ("stderr", 3, "    import transformers"),
             ("stderr", 4, "ModuleNotFoundError: No module named 'transformers'")]
    findings = diagnose(evidence(failed(), samples(n=60, gpu=0.0, gpu_mem=0.0), lines))
    assert causes(findings) == ["python_error"]
    assert "`transformers`" in findings[0].fixes[0]


# -- NaN -------------------------------------------------------------------------------------------


def test_nan_loss_in_the_log_cites_where_it_began():
    findings = diagnose(evidence(job(state="RUNNING", end_time=None), samples(), log("nan_loss.log", "stdout")))
    finding = only(findings, "nan_loss")
    assert finding.severity == CRITICAL
    assert finding.evidence == ("stdout:15: iter 1210: loss nan, time 411.02ms, mfu 38.25%", "(2 more lines like it)")
    fixes = " ".join(finding.fixes)
    assert "learning rate" in fixes and "torch.nn.utils.clip_grad_norm_" in fixes
    assert "bf16" in fixes and "isfinite" in fixes


def test_nan_from_tracked_metrics_names_run_key_and_step():
    findings = diagnose(evidence(job(), samples(), HEALTHY_STDOUT,
                                 nonfinite=[("gpt2-124m", "val/loss", 1300), ("gpt2-124m", "train/loss", 1210)]))
    assert causes(findings) == ["nan_loss"]
    assert findings[0].evidence == ("run 'gpt2-124m': train/loss became NaN/inf at step 1210",
                                    "run 'gpt2-124m': val/loss became NaN/inf at step 1300")


@pytest.mark.parametrize("line", [
    "{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.8e-05, 'epoch': 1.2}",                # Hugging Face Trainer
    "Epoch 3:  42%|████▏     | 420/1000 [01:02<01:26,  6.71it/s, v_num=0, train_loss=nan]",  # Lightning
    "ValueError: Loss is NaN, stopping training",
    "step 300 | loss: inf | lr 3.0e-04",
    "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.",  # detect_anomaly
])
def test_nan_loss_lines_as_frameworks_print_them(line: str):
    assert "nan_loss" in causes(diagnose(evidence(job(), samples(), [("stdout", 7, line)])))


@pytest.mark.parametrize("line", [
    "iter 10: loss 9.6142, time 411.20ms, mfu 38.20%",
    "[INFO] loss scale 65536.0, skipped 0 steps",
    "epoch 2: val_loss=2.3141 nan_count=0 info=ok",
    "Loss: 0.2341 | inference time 1.2 s",
])
def test_finite_loss_lines_are_not_nan(line: str):
    assert diagnose(evidence(job(), samples(), [("stdout", 7, line)])) == []


# -- CUDA out of memory ----------------------------------------------------------------------------


def test_cuda_oom_quotes_the_line_and_reads_pytorchs_numbers():
    findings = diagnose(evidence(failed(), samples(n=20), log("cuda_oom.log")))
    assert causes(findings) == ["cuda_oom"]  # the traceback's last line is this error: no second finding
    finding = findings[0]
    assert finding.severity == CRITICAL and finding.title == "CUDA ran out of GPU memory"
    assert finding.evidence[0].startswith(
        "stderr:21: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has")
    assert "PyTorch tried to allocate 2.00 GiB on GPU 0 (79.15 GiB total, 1.19 GiB free)" in finding.evidence
    assert "PyTorch held 75.12 GiB allocated and 1.33 GiB reserved but unallocated" in finding.evidence
    fixes = " ".join(finding.fixes)
    for remedy in ("batch size", "gradient accumulation", "bf16", "gradient checkpointing", "FSDP", "ZeRO"):
        assert remedy in fixes
    # little memory was reserved but unallocated: fragmentation is the last thing to try
    assert "expandable_segments:True" in finding.fixes[-1]


def test_cuda_oom_with_a_fragmented_cache_puts_expandable_segments_first():
    finding = only(diagnose(evidence(failed(), None, log("cuda_oom_fragmented.log"))), "cuda_oom")
    assert finding.evidence[0].startswith(
        "stderr:8: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0;")
    assert "PyTorch held 31.02 GiB allocated and 6.10 GiB reserved but unallocated" in finding.evidence
    assert finding.fixes[0].startswith("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: out of memory",
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
])
def test_other_cuda_oom_spellings(line: str):
    findings = diagnose(evidence(failed(), None, [("stderr", 1, "Traceback (most recent call last):"),
                                                  ("stderr", 2, line)]))
    assert causes(findings) == ["cuda_oom"]
    assert findings[0].evidence[0] == f"stderr:2: {line}"


# -- host memory -----------------------------------------------------------------------------------


def test_corral_memory_kill_is_host_oom_with_a_bigger_mem():
    lines = HEALTHY_STDOUT[:5] + [("stderr", 40, "corral: job exceeded its memory limit of 16384 MB; killed")]
    findings = diagnose(evidence(job(state="OUT_OF_MEMORY", exit_code=137, signal=9),
                                 samples(rss=16100.0), lines))
    assert causes(findings) == ["host_oom"]
    finding = findings[0]
    assert finding.evidence[:2] == (
        "the job ended OUT_OF_MEMORY: killed for using more host memory than it asked for",
        "stderr:40: corral: job exceeded its memory limit of 16384 MB; killed")
    assert "its memory peaked at 15.74 GB (its samples), against the 16 GB requested" in finding.evidence
    assert finding.fixes[0].startswith("Ask for more host memory: --mem 24G")
    assert any("DataLoader workers" in fix for fix in finding.fixes)
    assert any("mmap_mode" in fix for fix in finding.fixes)


def test_an_oom_killed_job_is_quoted_at_its_accounting_peak_as_eff_states_it():
    """The issue's job: samples saw 42 MB before it allocated; its cgroup counted 508.3 MB when it ended."""
    oom = job(state="OUT_OF_MEMORY", exit_code=137, signal=9, mem_mb=500, gpus=0)
    rows = samples(3, gpu=None, gpu_mem=None, rss=42.0)
    final = {"cpu_time_s": 0.4, "max_rss_mb": 508.3, "memory_source": "cgroup"}
    usage = job_usage(summarize(rows), final)
    finding = only(diagnose(evidence(oom, rows, usage=usage)), "host_oom")
    eff = local_efficiency(oom, summarize(rows), final)
    assert eff["max_rss_mb"] == usage.peak_rss_mb == 508.3 and eff["memory_source"] == "cgroup"
    assert ("its memory peaked at 508.3 MB (the kernel's count for its cgroup when it ended), "
            "against the 500 MB requested") in finding.evidence
    assert not any("42" in item for item in finding.evidence)


def test_a_dataloader_worker_killed_by_the_kernel_is_host_oom_not_a_python_error():
    findings = diagnose(evidence(failed(), None, log("dataloader_killed.log")))
    assert causes(findings) == ["host_oom"]
    assert findings[0].evidence[0] == (
        "stderr:23: RuntimeError: DataLoader worker (pid 48213) is killed by signal: Killed.")


def test_sigkill_with_memory_at_its_request_is_host_oom():
    findings = diagnose(evidence(job(state="FAILED", exit_code=137, signal=9), samples(rss=15900.0), HEALTHY_STDOUT))
    assert causes(findings) == ["host_oom"]
    assert "killed by signal 9 (SIGKILL) with its memory at 97% of its request" in findings[0].evidence[-1]


def test_sigkill_far_below_its_memory_request_is_not_host_oom():
    findings = diagnose(evidence(job(state="FAILED", exit_code=137, signal=9), samples(rss=4000.0), HEALTHY_STDOUT))
    assert causes(findings) == ["exit_status"]
    assert findings[0].title == "The program was killed by signal 9 (SIGKILL)"
    assert "out-of-memory killer on a full node" in findings[0].fixes[0]


def test_a_failure_nothing_explains_still_says_how_it_ended_and_quotes_its_last_error():
    lines = HEALTHY_STDOUT[:3] + [("stderr", 5, "error: shard 17 has a bad checksum"), ("stdout", 6, "bye")]
    findings = diagnose(evidence(failed(exit_code=3), samples(), lines))
    assert causes(findings) == ["exit_status"]
    assert findings[0].evidence == ("the job ended FAILED: its program exited with code 3",
                                    "its last error output: stderr:5: error: shard 17 has a bad checksum")
    merged = [("stdout", 1, "loading shards"), ("stdout", 2, "error: shard 17 has a bad checksum")]
    assert diagnose(evidence(failed(exit_code=3), samples(), merged))[0].evidence[1] == (
        "its last output: stdout:2: error: shard 17 has a bad checksum")


@pytest.mark.parametrize("line", [
    "/var/spool/slurmd/job4711/slurm_script: line 12: 48213 Killed                  python train.py",
    "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4711.batch. Some of your processes may have been "
    "killed by the cgroup out-of-memory handler.",
    "Killed",
])
def test_kernel_and_slurm_kill_messages_are_host_oom(line: str):
    assert causes(diagnose(evidence(failed(exit_code=137), None, [("stderr", 3, line)]))) == ["host_oom"]


# -- time limit ------------------------------------------------------------------------------------


def test_timeout_without_a_checkpoint_is_critical_with_the_fixes():
    timed_out = job(state="TIMEOUT", exit_code=None, signal=15, end_time=iso(T0 + 3602))
    findings = diagnose(evidence(timed_out, samples(), HEALTHY_STDOUT, checkpoints=0))
    assert causes(findings) == ["timeout_no_checkpoint"]
    finding = findings[0]
    assert finding.severity == CRITICAL
    assert finding.evidence == ("the job ran 1:00:02 of its 1:00:00 time limit",
                                "no checkpoint was saved: everything it computed is lost")
    fixes = " ".join(finding.fixes)
    assert "run.save_checkpoint" in fixes and "run.checkpoint_due()" in fixes
    assert "--time 2:00:00" in fixes and "--signal USR1@120" in fixes


@pytest.mark.parametrize("limit, lead", [(3600, 120), (600, 60), (60, 6), (20, 2), (19, None), (None, 120)])
def test_the_warning_before_the_limit_fits_the_jobs_own_limit(limit, lead):
    assert warning_lead_s(limit) == lead


def test_a_one_minute_job_is_not_told_to_warn_two_minutes_before_its_limit():
    timed_out = job(state="TIMEOUT", exit_code=None, signal=15, time_limit_s=60, end_time=iso(T0 + 61))
    fixes = " ".join(only(diagnose(evidence(timed_out, None, HEALTHY_STDOUT)), "timeout_no_checkpoint").fixes)
    assert "USR1@120" not in fixes
    assert "--signal USR1@6 sends SIGUSR1 6 s before it (a tenth of its 1:00 limit)" in fixes
    short = job(state="TIMEOUT", exit_code=None, signal=15, time_limit_s=15, end_time=iso(T0 + 16))
    assert "--signal" not in " ".join(only(diagnose(evidence(short, None, HEALTHY_STDOUT)), "timeout_no_checkpoint").fixes)


def test_timeout_with_checkpoints_is_milder():
    timed_out = job(state="TIMEOUT", exit_code=None, signal=15, end_time=iso(T0 + 3602))
    findings = diagnose(evidence(timed_out, samples(), HEALTHY_STDOUT, checkpoints=3))
    assert causes(findings) == ["timeout"]
    assert findings[0].severity == WARNING
    assert "its runs saved 3 checkpoints" in findings[0].evidence
    assert "resumes" in findings[0].fixes[0]


# -- hung ------------------------------------------------------------------------------------------


def running(**changes: Any) -> dict[str, Any]:
    return job(state="RUNNING", exit_code=None, end_time=None, **changes)


def test_a_running_job_without_output_or_steps_for_long_is_hung():
    now = T0 + 7200
    ev = evidence(running(), samples(gpu=100.0), HEALTHY_STDOUT, now=now, log_mtime=now - 47 * 60,
                  last_steps=[("gpt2", "train/loss", 1990, now - 52 * 60), ("gpt2", "lr", 1990, now - 52 * 60)])
    findings = diagnose(ev)
    assert causes(findings) == ["hung"]
    finding = findings[0]
    assert finding.severity == CRITICAL and finding.title == "No progress for 47 min: the job looks hung"
    assert finding.evidence[0].startswith("no log output for 47 min (last written 2024-06-10 ")
    assert finding.evidence[1].startswith("no tracked step for 52 min: the last was run 'gpt2' train/loss step 1990")
    assert "collective (NCCL)" in finding.evidence[2]
    fixes = " ".join(finding.fixes)
    assert "py-spy dump" in fixes and "gpu-node-03" in fixes and "NCCL_DEBUG=INFO" in fixes and "timeout=" in fixes


def test_the_hung_threshold_is_a_parameter():
    now = T0 + 7200
    ev = evidence(running(), samples(), HEALTHY_STDOUT, now=now, log_mtime=now - 20 * 60)
    assert diagnose(ev) == []
    assert causes(diagnose(ev, hung_after_s=600)) == ["hung"]


def test_a_job_that_never_printed_or_logged_is_hung_after_the_threshold():
    now = T0 + 3000
    findings = diagnose(evidence(running(), samples(), [], now=now))
    assert causes(findings) == ["hung"]
    assert findings[0].evidence[0] == "no log output at all in the 50 min since it started"


def test_without_times_a_job_that_prints_is_not_called_hung():
    # log lines but no log_mtime and no tracked steps: nothing says when it last printed
    assert diagnose(evidence(running(), samples(), HEALTHY_STDOUT, now=T0 + 86400)) == []


def test_nccl_watchdog_timeout_is_its_own_finding():
    findings = diagnose(evidence(failed(exit_code=-6), samples(gpu=100.0), log("nccl_timeout.log")))
    finding = only(findings, "nccl_timeout")
    assert finding.evidence[0].startswith("stderr:1: [rank1]:[E611 15:12:40.207913521 ProcessGroupNCCL.cpp:607] "
                                          "[Rank 1] Watchdog caught collective operation timeout")
    assert "the ALLREDUCE collective waited 10 min for the other ranks" in finding.evidence
    assert any("NCCL_DEBUG=INFO" in fix for fix in finding.fixes)


# -- programs and tracebacks -----------------------------------------------------------------------


def test_exit_127_is_a_missing_program():
    findings = diagnose(evidence(failed(exit_code=127), None, log("command_not_found.log")))
    assert causes(findings) == ["command_not_found"]
    assert findings[0].evidence == ("exit code 127: the program could not be found or started",
                                    "stderr:1: /home/alice/.corral/jobs/12/script: line 5: torchrun: command not found")
    assert any("/home/alice/gpt" in fix for fix in findings[0].fixes)


def test_corral_could_not_start_the_program():
    line = "corral: cannot run 'trian.py': No such file or directory"
    findings = diagnose(evidence(failed(exit_code=127), None, [("stderr", 1, line)]))
    assert causes(findings) == ["command_not_found"] and findings[0].evidence[1] == f"stderr:1: {line}"


def test_python_cannot_open_the_script():
    line = "python: can't open file '/home/alice/gpt/trian.py': [Errno 2] No such file or directory"
    assert causes(diagnose(evidence(failed(exit_code=2), None, [("stderr", 1, line)]))) == ["command_not_found"]


def test_a_rank_traceback_is_quoted_rather_than_torchruns_wrapper():
    findings = diagnose(evidence(failed(), None, log("torchrun_index_error.log")))
    assert causes(findings) == ["python_error"]
    finding = findings[0]
    assert finding.title == "The program failed with IndexError"
    assert finding.evidence == ("stderr:12: [rank0]: IndexError: list index out of range",
                                "raised in __getitem__ at /home/alice/gpt/data.py:31 (stderr:9)")
    assert "corral logs 12 --stderr" in finding.fixes[-1]


def test_a_file_not_found_error_is_the_programs_error_not_a_missing_program():
    lines = [("stderr", 1, "Traceback (most recent call last):"),
             ("stderr", 2, '  File "/home/alice/gpt/train.py", line 20, in <module>'),
             ("stderr", 3, "    data = np.load('data/train.bin')"),
             ("stderr", 4, "FileNotFoundError: [Errno 2] No such file or directory: 'data/train.bin'")]
    findings = diagnose(evidence(failed(), None, lines))
    assert causes(findings) == ["python_error"]
    assert findings[0].fixes[0].startswith("Relative paths start from the job's working directory (/home/alice/gpt)")


def test_a_traceback_in_a_job_that_completed_is_not_a_failure():
    lines = [("stderr", 1, "Traceback (most recent call last):"), ("stderr", 2, "KeyError: 'wandb'")]
    assert diagnose(evidence(job(), samples(), lines)) == []


# -- together --------------------------------------------------------------------------------------


def test_critical_findings_come_before_warnings():
    timed_out = job(state="TIMEOUT", exit_code=None, signal=15, end_time=iso(T0 + 3602))
    findings = diagnose(evidence(timed_out, samples(gpu=12.0, cpu=97.0), HEALTHY_STDOUT, checkpoints=0,
                                 nonfinite=[("gpt2", "train/loss", 900)]))
    assert causes(findings) == ["nan_loss", "timeout_no_checkpoint", "data_loading"]
    assert [f.severity for f in findings] == [CRITICAL, CRITICAL, WARNING]


def test_a_recovered_cuda_oom_is_a_warning_after_the_critical_nan():
    # the script caught the OOM and retried with a smaller batch; the NaN later is what spoiled the run
    lines = [("stderr", 88, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 1 has a "
                            "total capacity of 39.38 GiB of which 301.44 MiB is free."),
             ("stdout", 90, "retrying with batch size 16")]
    findings = diagnose(evidence(job(), samples(), lines, nonfinite=[("vit", "train/loss", 4000)]))
    assert [(f.cause, f.severity) for f in findings] == [("nan_loss", CRITICAL), ("cuda_oom", WARNING)]
    assert "PyTorch tried to allocate 0.50 GiB on GPU 1 (39.38 GiB total, 0.29 GiB free)" in findings[1].evidence


def test_format_diagnosis_reads_as_numbered_findings():
    findings = diagnose(evidence(failed(), samples(n=20), log("cuda_oom.log")))
    text = format_diagnosis(failed(), findings)
    lines = text.splitlines()
    assert lines[0] == "Job 12 (train), FAILED, exit code 1: 1 problem found."
    assert lines[2] == "1. [critical] CUDA ran out of GPU memory  (cuda_oom)"
    assert lines[3] == "   Evidence:"
    assert lines[4].startswith("     - stderr:21: torch.OutOfMemoryError: CUDA out of memory.")
    assert "   Fix:" in lines
    assert all(len(line) <= 320 for line in lines)  # the long PyTorch line is clipped


# -- what could not be checked, and requests far above use -------------------------------------------


def test_gpus_without_a_driver_are_said_unchecked_and_an_8g_request_for_a_few_mb_is_flagged():
    """The issue's job: 2 GPUs and 8 GB asked for, neither used, on a node whose GPUs no driver reads."""
    idle = job(gpus=2, mem_mb=8192, cpus=1, end_time=iso(T0 + 20))
    rows = samples(3, gpu=None, gpu_mem=None, rss=30.0)
    final = {"cpu_time_s": 0.2, "max_rss_mb": 35.0, "memory_source": "cgroup"}
    seen = evidence(idle, rows, HEALTHY_STDOUT[:3], usage=job_usage(summarize(rows), final), gpu_driver=False)
    findings = diagnose(seen)
    assert causes(findings) == ["oversized_request"]
    assert findings[0].evidence[0].startswith("it asked for 8.0 GB of host memory and peaked at 35.0 MB (0%")
    assert "--mem 1G" in findings[0].fixes[0]
    missing = unchecked(seen)
    assert missing == ["GPU use of its 2 GPUs: no GPU driver (NVML) answers where it ran, so no sample has GPU "
                       "figures."]
    text = format_diagnosis(idle, findings, missing)
    assert "Not checked:" in text and "no GPU driver" in text


def test_a_job_with_no_samples_says_its_gpus_went_unchecked_and_says_no_problem_only_with_that():
    seen = evidence(job(gpus=2, mem_mb=1024, cpus=1), None, HEALTHY_STDOUT[:3])
    assert diagnose(seen) == []
    missing = unchecked(seen)
    assert missing[0] == "GPU use of its 2 GPUs: it has no samples (it ended before the first one)."
    text = format_diagnosis(job(), [], missing)
    assert text.startswith("Job 12 (train), COMPLETED: no problem found.") and "Not checked:" in text


def test_short_gpu_samples_are_said_too_short_to_judge():
    seen = evidence(job(), samples(4, gpu=0.0, gpu_mem=None), HEALTHY_STDOUT[:3])
    assert "its 4 samples span 30 s; GPU findings need 3 or more samples across 5 min" in unchecked(seen)[0]
    assert unchecked(evidence(job(), samples(), HEALTHY_STDOUT)) == []
