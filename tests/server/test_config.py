"""`<home>/config.toml` under the command line."""

from __future__ import annotations

import os

import pytest

from corral.errors import InvalidRequest
from corral.executor.gpus import DeclaredInventory
from corral.server.main import ServerOptions, load_config


def write_config(home: str, text: str) -> None:
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(text)


def test_config_file_fills_what_the_command_line_left_unset(tmp_path):
    write_config(str(tmp_path), '[server]\nport = 9999\nkill_grace_s = 30\n[node]\ngpus = 8\ngpu_type = "H100"\n')
    options = load_config(ServerOptions(home=str(tmp_path), port=8765, inventory=DeclaredInventory(gpus=2)), {"gpus"})
    assert options.port == 9999 and options.kill_grace_s == 30
    assert options.inventory.gpus == 2  # given on the command line: it wins
    assert options.inventory.gpu_type == "H100"


def test_no_config_file_changes_nothing(tmp_path):
    options = ServerOptions(home=str(tmp_path))
    assert load_config(options, set()) == options


@pytest.mark.parametrize("text, field", [
    ("[server]\nprot = 1\n", "server.prot"),
    ("[node]\ngpus = 'four'\n", "node.gpus"),
    ("[scheduler]\nx = 1\n", "config.toml"),
    ("[server\n", "config.toml"),
])
def test_a_bad_config_file_is_an_error_that_names_the_key(tmp_path, text, field):
    write_config(str(tmp_path), text)
    with pytest.raises(InvalidRequest) as info:
        load_config(ServerOptions(home=str(tmp_path)), set())
    assert info.value.field == field
