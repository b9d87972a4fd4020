"""`<home>/config.toml` under the command line."""

from __future__ import annotations

import os

import pytest

from corral.compose.config import ServerOptions, load_config
from corral.core.scheduling.resources import DeclaredInventory
from corral.core.scheduling.sharing import SharingSettings
from corral.errors import InvalidRequest


def write_config(home: str, text: str) -> None:
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(text)


def test_config_file_fills_what_the_command_line_left_unset(tmp_path):
    write_config(str(tmp_path), '[server]\nport = 9999\nkill_grace_s = 30\n[node]\ngpus = 8\ngpu_type = "H100"\n')
    options = load_config(ServerOptions(home=str(tmp_path), port=8765, inventory=DeclaredInventory(gpus=2)), {"gpus"})
    assert options.port == 9999 and options.kill_grace_s == 30
    assert options.inventory.gpus == 2  # given on the command line: it wins
    assert options.inventory.gpu_type == "H100"


def test_monitor_and_smtp_sections_are_read(tmp_path):
    write_config(str(tmp_path), '[monitor]\nsample_interval_s = 2.5\n[smtp]\nhost = "mail.lab"\nport = 587\nstarttls = true\n')
    options = load_config(ServerOptions(home=str(tmp_path)), set())
    assert options.sample_interval_s == 2.5
    assert options.smtp == {"host": "mail.lab", "port": 587, "starttls": True}


def test_the_dashboard_logins_lifetime_is_read(tmp_path):
    assert load_config(ServerOptions(home=str(tmp_path)), set()).auth.session_hours == 8  # the default
    write_config(str(tmp_path), "[auth]\nsession_hours = 0.5\n")
    assert load_config(ServerOptions(home=str(tmp_path)), set()).auth.session_hours == 0.5


def test_the_batch_script_cap_is_4_mb_by_default_and_read_from_the_server_section(tmp_path):
    assert load_config(ServerOptions(home=str(tmp_path)), set()).max_script_mb == 4  # Slurm's max_script_size
    write_config(str(tmp_path), "[server]\nmax_script_mb = 32\n")
    assert load_config(ServerOptions(home=str(tmp_path)), set()).max_script_mb == 32


def test_the_per_peer_caps_and_the_unauthenticated_limit_are_read(tmp_path):
    defaults = load_config(ServerOptions(home=str(tmp_path)), set()).auth
    assert (defaults.max_connections_per_user, defaults.max_streams_per_user) == (256, 16)
    assert (defaults.unauthenticated_per_s, defaults.unauthenticated_burst) == (5, 50)
    write_config(str(tmp_path), "[auth]\nmax_connections_per_user = 32\nmax_streams_per_user = 0\n"
                                "unauthenticated_per_s = 1.5\nunauthenticated_burst = 10\n")
    auth = load_config(ServerOptions(home=str(tmp_path)), set()).auth
    assert (auth.max_connections_per_user, auth.max_streams_per_user) == (32, 0)
    assert (auth.unauthenticated_per_s, auth.unauthenticated_burst) == (1.5, 10)


def test_no_config_file_changes_nothing(tmp_path):
    options = ServerOptions(home=str(tmp_path))
    assert load_config(options, set()) == options


@pytest.mark.parametrize("text, field", [
    ("[server]\nprot = 1\n", "server.prot"),
    ("[node]\ngpus = 'four'\n", "node.gpus"),
    ("[scheduler]\nx = 1\n", "scheduler.x"),
    ("[bogus]\nx = 1\n", "config.toml"),
    ("[partitions.debug]\nmax_time = 'soon'\n", "partitions.debug.max_time"),
    ("[qos.normal]\nmax_gpus_per_user = -1\n", "qos.normal.max_gpus_per_user"),
    ("[scheduler]\ndefault_partition = 'gpu'\n[partitions.debug]\n", "scheduler.default_partition"),
    ("[scheduler.weights]\nage = 'lots'\n", "scheduler.weights.age"),
    ("[server\n", "config.toml"),
    ("[monitor]\nsample_interval_s = 0\n", "monitor.sample_interval_s"),
    ("[server]\nmax_log_mb = 0\n", "server.max_log_mb"),
    ("[monitor]\nsample_retention_days = -1\n", "monitor.sample_retention_days"),
    ("[monitor]\nsample_every = 3\n", "monitor.sample_every"),
    ("[smtp]\nport = '25'\n", "smtp.port"),
    ("[smtp]\nstarttls = 'yes'\n", "smtp.starttls"),
    ("[auth]\nsession_hours = 0\n", "auth.session_hours"),
    ("[auth]\nsession_hours = 1000\n", "auth.session_hours"),
    ("[auth]\nsession_hours = '8h'\n", "auth.session_hours"),
    ("[server]\nmax_script_mb = 0\n", "server.max_script_mb"),
    ("[server]\nmax_script_mb = 33\n", "server.max_script_mb"),
    ("[server]\nmax_script_mb = '4M'\n", "server.max_script_mb"),
    ("[auth]\nmax_connections_per_user = -1\n", "auth.max_connections_per_user"),
    ("[auth]\nmax_streams_per_user = 1.5\n", "auth.max_streams_per_user"),
    ("[auth]\nunauthenticated_per_s = -1\n", "auth.unauthenticated_per_s"),
    ("[auth]\nunauthenticated_burst = 0\n", "auth.unauthenticated_burst"),
])
def test_a_bad_config_file_is_an_error_that_names_the_key(tmp_path, text, field):
    write_config(str(tmp_path), text)
    with pytest.raises(InvalidRequest) as info:
        load_config(ServerOptions(home=str(tmp_path)), set())
    assert info.value.field == field


def test_partitions_qos_and_weights_are_read(tmp_path):
    write_config(str(tmp_path), """
[scheduler]
half_life = "2-00:00:00"
default_partition = "gpu"
[scheduler.weights]
fairshare = 5000
max_age = "1-00:00:00"
[partitions.debug]
max_time = "30m"
tier = 2
[partitions.gpu]
default_time = "4h"
allowed_users = ["ada", "bob"]
[qos.normal]
max_running_per_user = 2
max_gpus_per_user = 4
""")
    config = load_config(ServerOptions(home=str(tmp_path)), set()).scheduler
    assert config.half_life_s == 2 * 86400 and config.weights.fairshare == 5000 and config.weights.max_age_s == 86400
    assert config.default_partition == "gpu"
    assert config.partitions["debug"].max_time_s == 1800 and config.partitions["debug"].tier == 2
    assert config.partitions["gpu"].default_time_s == 4 * 3600
    assert config.partitions["gpu"].allowed_users == {"ada", "bob"}
    assert config.qos["normal"].max_running_per_user == 2 and config.qos["normal"].max_gpus_per_user == 4


def test_a_partition_open_to_a_group_admits_its_members():
    import grp
    import os
    import pwd

    from corral.core.scheduling.schedconfig import Partition
    from corral.server.accounts import may_use as _may_use

    me = pwd.getpwuid(os.getuid()).pw_name
    mine = grp.getgrgid(os.getgid()).gr_name
    assert _may_use(Partition("p", allowed_groups=frozenset({mine})), me)
    assert not _may_use(Partition("p", allowed_groups=frozenset({"no-such-group-xyz"})), me)
    assert _may_use(Partition("p"), me)
    assert not _may_use(Partition("p", allowed_users=frozenset({"someone-else"})), me)


def test_corral_up_with_a_bad_config_file_says_which_key(tmp_path):
    import subprocess
    import sys

    write_config(str(tmp_path), "[qos.normal]\nmax_gpu_per_user = 4\n")
    result = subprocess.run([sys.executable, "-m", "corral.cli", "up", "--home", str(tmp_path), "--port", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "qos.normal.max_gpu_per_user" in result.stderr and "max_gpus_per_user" in result.stderr


def test_the_artifact_store_and_its_limits_are_read_from_the_tracking_section(tmp_path):
    defaults = load_config(ServerOptions(home=str(tmp_path)), set())
    assert (defaults.artifact_dir, defaults.max_artifact_mb, defaults.user_artifact_quota_mb) == (None, 10_240, 102_400)
    write_config(str(tmp_path), '[tracking]\nartifact_dir = "/shared/corral/artifacts"\nmax_artifact_mb = 512\n'
                                "user_artifact_quota_mb = 4096\n")
    options = load_config(ServerOptions(home=str(tmp_path)), set())
    assert (options.artifact_dir, options.max_artifact_mb, options.user_artifact_quota_mb) == (
        "/shared/corral/artifacts", 512, 4096)
    for text, field in (('artifact_dir = "relative/dir"', "tracking.artifact_dir"), ("max_artifact_mb = 0", "tracking.max_artifact_mb"),
                        ("quota = 1", "tracking.quota")):
        write_config(str(tmp_path), f"[tracking]\n{text}\n")
        with pytest.raises(InvalidRequest) as refused:
            load_config(ServerOptions(home=str(tmp_path)), set())
        assert refused.value.field == field


def test_the_container_runtime_is_read_from_the_containers_section(tmp_path):
    write_config(str(tmp_path), '[containers]\nruntime = "podman"\n')
    assert load_config(ServerOptions(home=str(tmp_path)), set()).container_runtime == "podman"


def test_outside_processes_is_avoid_by_default_and_takes_ignore_or_share(tmp_path):
    assert load_config(ServerOptions(home=str(tmp_path)), set()).outside_processes == "avoid"
    write_config(str(tmp_path), '[node]\noutside_processes = "ignore"\n')
    assert load_config(ServerOptions(home=str(tmp_path)), set()).outside_processes == "ignore"
    write_config(str(tmp_path), '[node]\noutside_processes = "share"\n')
    assert load_config(ServerOptions(home=str(tmp_path)), set()).outside_processes == "share"
    write_config(str(tmp_path), '[node]\noutside_processes = "never"\n')
    with pytest.raises(InvalidRequest) as refused:
        load_config(ServerOptions(home=str(tmp_path)), set())
    assert refused.value.field == "node.outside_processes"


def test_sharing_settings_are_read_from_node_and_bad_ones_named(tmp_path):
    assert load_config(ServerOptions(home=str(tmp_path)), set()).sharing == SharingSettings(0, "stop", 60.0)
    write_config(str(tmp_path), '[node]\nshards_per_gpu = 8\ngpu_share_over_budget = "warn"\ngpu_share_grace_s = 5\n')
    assert load_config(ServerOptions(home=str(tmp_path)), set()).sharing == SharingSettings(8, "warn", 5.0)
    for text, field in (('shards_per_gpu = -1', "node.shards_per_gpu"), ('gpu_share_over_budget = "kill"',
                        "node.gpu_share_over_budget"), ('gpu_share_grace_s = -3', "node.gpu_share_grace_s")):
        write_config(str(tmp_path), f"[node]\n{text}\n")
        with pytest.raises(InvalidRequest) as refused:
            load_config(ServerOptions(home=str(tmp_path)), set())
        assert refused.value.field == field and refused.value.hint
