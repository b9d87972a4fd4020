#!/usr/bin/env python3
"""`srun --pty` against a local pseudo-terminal: keystroke to echo, and `cat` of a large file through it.

    .venv/bin/python bench/interactive.py [--keys 300] [--mb 100] [--json [PATH]]

Starts a server with one declared GPU in a fresh temporary home. Each side runs `bash --norc` in a
pseudo-terminal this script holds (as a terminal emulator would): the local side is bash itself, the
other is corral's `srun --pty -G 1 bash --norc`, whose bash runs as a job with its own pseudo-terminal,
relayed by the job's supervisor and srun. Both are measured the same way, alternately:

- keystroke to echo: one character written to the terminal, time until it comes back (bash's readline
  echoes it), one key at a time; the line is cleared (Ctrl-U) every 50 keys;
- throughput: `cat FILE` of a text file of `--mb` MB, from the command's Enter to the marker echoed after
  it, counting every byte the terminal shows.

Floors (issue 19): keystroke median <= 10 ms; cat >= 50 MB/s, through srun.
"""

from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import CORRAL, Server, add_common_args, emit, log, median, percentile, verdict  # noqa: E402

FLOOR_KEY_MS = 10.0
FLOOR_MB_S = 50.0
PROMPT = b"BENCH$ "


class Terminal:
    """A program in a pseudo-terminal whose master end we hold."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                                     preexec_fn=_controlling_terminal)
        os.close(slave)
        self.read_until(PROMPT, 60)

    def read_until(self, marker: bytes, timeout: float) -> int:
        """Read until `marker` shows; the bytes read."""
        deadline = time.monotonic() + timeout
        tail = b""
        count = 0
        while marker not in tail:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.master], [], [], left)[0]:
                raise RuntimeError(f"no {marker!r} within {timeout} s (last bytes {tail[-200:]!r})")
            data = os.read(self.master, 1 << 16)
            count += len(data)
            tail = tail[-len(marker):] + data
        return count

    def keystroke_ms(self, key: bytes) -> float:
        t0 = time.perf_counter()
        os.write(self.master, key)
        self.read_until(key, 10)
        return (time.perf_counter() - t0) * 1e3

    def close(self) -> None:
        os.write(self.master, b"\x15exit\r")
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self.master)


def _controlling_terminal() -> None:
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _keys(term: Terminal, n: int) -> list[float]:
    out = []
    for i in range(n):
        if i and i % 50 == 0:
            os.write(term.master, b"\x15")  # Ctrl-U: clear the line
            time.sleep(0.01)
            _drain(term.master)
        out.append(term.keystroke_ms(bytes([ord("a") + i % 26])))
    os.write(term.master, b"\x15")
    time.sleep(0.05)
    _drain(term.master)
    return out


def _cat_mb_s(term: Terminal, path: str, size: int) -> float:
    marker = f"END{time.monotonic_ns()}".encode()
    command = f"cat {path}; echo {marker[:3].decode()}''{marker[3:].decode()}\r".encode()  # the echoed command differs
    t0 = time.perf_counter()
    os.write(term.master, command)
    shown = term.read_until(marker, 300)
    elapsed = time.perf_counter() - t0
    time.sleep(0.1)
    _drain(term.master)  # the prompt after the marker
    if shown < size:
        raise RuntimeError(f"the terminal showed {shown} bytes of a {size}-byte file")
    return size / elapsed / 1e6


def _drain(fd: int) -> None:
    while select.select([fd], [], [], 0.02)[0]:
        os.read(fd, 1 << 16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=300)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="cat rounds per side (alternating)")
    add_common_args(parser)
    args = parser.parse_args()
    slurm_path = subprocess.run([CORRAL, "--home", "/nonexistent", "slurm-path"], capture_output=True, text=True,
                                check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="corral-bench-") as scratch, Server(gpus=1, keep_home=args.keep_home) as server:
        path = os.path.join(scratch, "big.txt")
        line = (b"0123456789abcdefghijklmnopqrstuvwxyz" * 3)[:99] + b"\n"
        with open(path, "wb") as f:
            f.write(line * (args.mb * 1_000_000 // len(line)))
        size = os.path.getsize(path) + os.path.getsize(path) // len(line)  # the terminal shows \n as \r\n
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CORRAL_"))}
        env.update(PATH=f"{slurm_path}:{env['PATH']}", CORRAL_HOME=server.home, PS1=PROMPT.decode(), TERM="xterm")
        bash = ["bash", "--norc", "--noprofile"]
        sides = {"local pty": Terminal(bash, env), "srun --pty": Terminal(["srun", "-G", "1", "--pty", *bash], env)}
        try:
            keys: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(3):  # alternate, so drift moves both sides alike
                for name, term in sides.items():
                    keys[name] += _keys(term, args.keys // 3)
            rates: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(args.rounds):
                for name, term in sides.items():
                    rates[name].append(_cat_mb_s(term, path, size))
                    log(f"{name}: cat {args.mb} MB at {rates[name][-1]:.0f} MB/s")
        finally:
            for term in sides.values():
                term.close()
    rows: list[dict[str, Any]] = []
    lines: list[tuple[str, Any, str]] = []
    for name in sides:
        row = {"side": name, "key_median_ms": round(median(keys[name]), 3),
               "key_p99_ms": round(percentile(keys[name], 99), 3), "cat_mb_s": round(median(rates[name]), 1)}
        lines += [(f"{name}: keystroke to echo, median", row["key_median_ms"], "ms"),
                  (f"{name}: keystroke to echo, p99", row["key_p99_ms"], "ms"),
                  (f"{name}: cat {args.mb} MB", row["cat_mb_s"], "MB/s")]
        rows.append(row)
    srun = rows[-1]
    key_verdict = verdict(srun["key_median_ms"], FLOOR_KEY_MS, higher_is_better=False)
    cat_verdict = verdict(srun["cat_mb_s"], FLOOR_MB_S, higher_is_better=True)
    lines += [("srun --pty keystroke (floor <= 10 ms)", key_verdict, ""),
              ("srun --pty cat (floor >= 50 MB/s)", cat_verdict, "")]
    emit({"benchmark": "interactive", "keys": args.keys, "mb": args.mb, "rows": rows,
          "verdicts": {"keystroke": key_verdict, "cat": cat_verdict}}, lines, args.json)


if __name__ == "__main__":
    main()
