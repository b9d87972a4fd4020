"""sbatch's --signal read as Slurm 22.05's get_signal_opts reads it: B: (the batch shell alone), R:, both."""

from __future__ import annotations

import signal

import pytest

from corral.core.jobspec.spec_signals import WarningSignal, parse_signal
from corral.errors import InvalidRequest


@pytest.mark.parametrize(("text", "expected"), [
    ("USR1@90", WarningSignal(signal.SIGUSR1, 90)),
    ("B:USR1@90", WarningSignal(signal.SIGUSR1, 90, batch=True)),
    ("b:sigusr2", WarningSignal(signal.SIGUSR2, 60, batch=True)),
    ("R:TERM@30", WarningSignal(signal.SIGTERM, 30, reservation=True)),
    ("BR:10@0", WarningSignal(10, 0, batch=True, reservation=True)),
    ("RB:12@65535", WarningSignal(12, 65535, batch=True, reservation=True)),
])
def test_the_flags_say_who_gets_it_and_the_time_defaults_to_60_s(text, expected):
    assert parse_signal(text) == expected


@pytest.mark.parametrize(("text", "says"), [
    ("X:USR1@90", "'X' is not a --signal flag"),
    ("BB:USR1", "'BB' is not a --signal flag"),
    (":USR1", "'' is not a --signal flag"),
    ("B:NOPE@9", "unknown signal 'NOPE'"),
    ("B:KILL@9", "'KILL' cannot be sent as a warning"),
    ("USR1@soon", "'soon' is not a number of seconds"),
    ("USR1@65536", "at most 65535 s"),
])
def test_bad_specifications_are_refused_naming_the_field(text, says):
    with pytest.raises(InvalidRequest) as refused:
        parse_signal(text)
    assert refused.value.field == "signal" and says in refused.value.message
