"""The monitor reads the jobs through `JobReader` alone, and writes runs through `TrackingService` alone."""

import ast
import asyncio
import inspect
from pathlib import Path

from corral.monitor.jobs import JobReader
from corral.server.service import JobService

MONITOR = Path(__file__).resolve().parents[2] / "src" / "corral" / "monitor"
SRC = MONITOR.parent


def _attributes_read(path: Path) -> set[str]:
    return {node.attr for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute)}


def test_the_job_service_answers_everything_a_job_reader_is_asked():
    asked = {name for name, _ in inspect.getmembers(JobReader) if not name.startswith("_")}
    asked |= set(JobReader.__annotations__)
    assert asked == {"user", "active_jobs", "resolve", "log_owner_uid", "is_admin", "checkpoint_dir",
                     "job_processes", "final_usage", "gpus_in_use_outside", "gpu_health", "gpu_memory_sampled"}
    assert all(callable(getattr(JobService, name)) for name in asked - {"user"})
    assert "self.user" in inspect.getsource(JobService.__init__)


def test_the_monitor_never_reads_the_job_services_internals():
    internals = {"active", "backend", "log_dir", "access", "allocations", "store"}
    for path in MONITOR.glob("*.py"):
        source = path.read_text()
        if "jobs" not in source:
            continue
        tree = ast.parse(source)
        for node in ast.walk(tree):
            # `self.jobs.X` or `jobs.X`: what the monitor asks of the jobs
            if isinstance(node, ast.Attribute) and (
                    (isinstance(node.value, ast.Attribute) and node.value.attr == "jobs") or
                    (isinstance(node.value, ast.Name) and node.value.id == "jobs")):
                assert node.attr not in internals, f"{path.name}: jobs.{node.attr}"
                assert node.attr in _reader_members(), f"{path.name}: jobs.{node.attr} is not in JobReader"


def _reader_members() -> set[str]:
    return {name for name, _ in inspect.getmembers(JobReader) if not name.startswith("_")} | set(JobReader.__annotations__)


def test_runs_are_appended_to_by_the_tracking_service_alone():
    """`RunStore.append` is called in tracking/ only, on its writer thread: the monitor's system metrics go through
    TrackingService, and MLflow's batches through its `transact`."""
    callers = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "conn"):
                callers.add(str(path.relative_to(SRC)))
    assert callers == {"tracking/service.py", "tracking/compat/mlflow_tracking.py"}


def test_system_metrics_reach_a_run_through_the_tracking_writer(tmp_path):
    import numpy as np

    from corral.monitor.recording import system_metrics
    from corral.monitor.sampling import JobSample
    from corral.store import migrate
    from corral.store.db import open_engine
    from corral.store.runs import RunStore
    from corral.tracking.service import TrackingService

    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    migrate.upgrade(engine)
    tracking = TrackingService(RunStore(engine), user="u", clock=lambda: 100.0)
    try:
        run, _ = asyncio.run(tracking.create_run({"project": "p"}, "u"))
        fields = {name: None for name in JobSample.__dataclass_fields__}
        sample = JobSample(**(fields | {"job_id": 7, "time": 112.5, "cpu_utilization": 97.0, "gpus": (),
                                        "stray_gpus": ()}))
        runs = [{"id": run["id"], "job_id": 7, "state": "running", "start_time": 100.0}]
        tracking.append_system_metrics(system_metrics(runs, [sample]))
        with engine.connect() as conn:
            count, _, points = tracking.store.series(conn, run["id"], "system/cpu_utilization", start=None, end=None,
                                                     max_points=10)
        assert count == 1 and list(points.steps) == [12] and np.allclose(points.values, [97.0])
        tracking.append_system_metrics({})  # nothing to write: no transaction at all
    finally:
        tracking.close()
        engine.dispose()
