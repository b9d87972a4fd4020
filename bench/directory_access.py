#!/usr/bin/env python3
"""What checking a submitter's directory as the submitter costs a submit (root only, in-process).

    .venv/bin/python bench/directory_access.py [--user corral-alice] [--checks 5000] [--repeats 5] [--json [PATH]]

A shared (root) server checks `workdir` and `submit_dir` of another user's submit with that
user's filesystem ids, on a thread of its own (corral.executor.directory_access), so a path
the user may not reach reads like one that does not exist. Measured per check, median of
--repeats rounds of --checks each:

    as user      DirectoryAccess.checker(user)(path), each time a directory not checked in the last
                 5 s (a new one per check): the hop to the checking thread, the ids switched,
                 stat("path/."), switched back
    again        the same directory again within 5 s (a loop of submits from one directory)
    as process   can_enter(path) with the server's own ids (a personal server; root's own jobs)

A submit makes two checks. Floor: as user, median ≤ 200 µs per check.
"""

from __future__ import annotations

import argparse
import os
import sys
import shutil
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit, log, median, verdict  # noqa: E402

FLOOR_US = 200.0


def per_check_us(check, paths: list[str], repeats: int) -> list[float]:
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for path in paths:
            if not check(path):
                raise SystemExit(f"cannot enter {path}")
        rounds.append((time.perf_counter() - start) / len(paths) * 1e6)
    return rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", default="corral-alice", help="An account of this machine to check as.")
    parser.add_argument("--checks", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("checking as another user needs root", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
    from corral.executor.directory_access import DirectoryAccess, can_enter

    path = tempfile.mkdtemp(prefix="corral-bench-dir-", dir="/tmp")
    os.chmod(path, 0o755)
    fresh = [[f"{path}/{r}-{i}/.." for i in range(args.checks)] for r in range(args.repeats)]  # each names `path`
    access = DirectoryAccess()
    try:
        as_user = access.checker(args.user)
        log(f"{args.checks} checks x {args.repeats} as {args.user}, then as this process")
        for r in range(args.repeats):
            for i in range(args.checks):
                os.mkdir(f"{path}/{r}-{i}")
        user_us = [per_check_us(as_user, paths, 1)[0] for paths in fresh]
        again_us = per_check_us(as_user, [path] * args.checks, args.repeats)
        own_us = per_check_us(can_enter, [path] * args.checks, args.repeats)
    finally:
        access.close()
        shutil.rmtree(path)
    result = {"user": args.user, "checks": args.checks, "repeats": args.repeats,
              "as_user_us": {"median": median(user_us), "rounds": user_us},
              "again_us": {"median": median(again_us), "rounds": again_us},
              "as_process_us": {"median": median(own_us), "rounds": own_us},
              "floor_us": FLOOR_US, "verdict": verdict(median(user_us), FLOOR_US, higher_is_better=False)}
    emit(result, [("as user, per check (median)", median(user_us), "µs"),
                  ("as user, the same directory again (median)", median(again_us), "µs"),
                  ("as process, per check (median)", median(own_us), "µs"),
                  ("added to a submit of another user (2 checks)", 2 * (median(user_us) - median(own_us)), "µs"),
                  ("floor (as user)", f"≤ {FLOOR_US:.0f}", "µs"), ("verdict", result["verdict"], "")], args.json)
    return 0 if result["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
