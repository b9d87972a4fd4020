"""The devices a job may not open, on cgroup v2: a BPF program attached to its cgroup.

cgroup v2 has no `devices.deny`; the kernel asks every BPF_PROG_TYPE_CGROUP_DEVICE program
attached to the cgroup and its ancestors (what systemd's DeviceAllow= and runc do). Ours
denies the listed devices and allows the rest:

    r2 = ctx->access_type & 0xffff      (1 block, 2 char)
    r3 = ctx->major; r4 = ctx->minor
    for each denied (type, major, minor):
        if r2 == type and r3 == major and r4 == minor: return 0
    return 1

A few dozen instructions, built here and loaded with the bpf() system call through ctypes,
so the supervisor needs nothing beyond the standard library. Once attached, the program
lives as long as the cgroup.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

_BPF_SYSCALL = {"x86_64": 321, "aarch64": 280, "ppc64le": 361, "s390x": 351}
_BPF_PROG_LOAD = 5
_BPF_PROG_ATTACH = 8
_BPF_PROG_TYPE_CGROUP_DEVICE = 15
_BPF_CGROUP_DEVICE = 6
_BPF_F_ALLOW_MULTI = 2
_DEVICE_TYPE = {"b": 1, "c": 2}

# opcodes
_LDX_W = 0x61  # r_dst = *(u32 *)(r_src + off)
_AND32_K = 0x54  # w_dst &= imm
_JNE_K = 0x55  # if r_dst != imm goto +off
_JEQ_K = 0x15  # if r_dst == imm goto +off
_MOV64_K = 0xB7  # r_dst = imm
_EXIT = 0x95


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def device_filter_program(deny: tuple[tuple[str, int, int], ...]) -> bytes:
    """The program's instructions: deny `deny` ((type 'c'/'b', major, minor)), allow everything else."""
    n = len(deny)
    out = [_insn(_LDX_W, 2, 1, 0), _insn(_AND32_K, 2, imm=0xFFFF), _insn(_LDX_W, 3, 1, 4), _insn(_LDX_W, 4, 1, 8)]
    for i, (kind, major, minor) in enumerate(deny):
        out += [_insn(_JNE_K, 2, off=2, imm=_DEVICE_TYPE[kind]), _insn(_JNE_K, 3, off=1, imm=major),
                _insn(_JEQ_K, 4, off=3 * (n - i) - 1, imm=minor)]
    out += [_insn(_MOV64_K, 0, imm=1), _insn(_EXIT), _insn(_MOV64_K, 0, imm=0), _insn(_EXIT)]
    return b"".join(out)


def attach_device_filter(cgroup_dir: str, deny: tuple[tuple[str, int, int], ...]) -> None:
    """Load the filter and attach it to the cgroup at `cgroup_dir`.

    Raises:
        OSError: the kernel refused to load or attach it (no BPF, not root, an old kernel).
    """
    number = _BPF_SYSCALL.get(platform.machine())
    if number is None:
        raise OSError(0, f"no bpf() system call number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    program = device_filter_program(deny)
    insns = ctypes.create_string_buffer(program, len(program))
    license_ = ctypes.create_string_buffer(b"Apache-2.0")
    log = ctypes.create_string_buffer(65536)
    attr = ctypes.create_string_buffer(128)
    struct.pack_into("<IIQQIIQ", attr, 0, _BPF_PROG_TYPE_CGROUP_DEVICE, len(program) // 8,
                     ctypes.addressof(insns), ctypes.addressof(license_), 1, len(log), ctypes.addressof(log))
    prog_fd = libc.syscall(number, _BPF_PROG_LOAD, attr, len(attr))
    if prog_fd < 0:
        err = ctypes.get_errno()
        detail = log.value.decode(errors="replace").strip().splitlines()
        raise OSError(err, f"cannot load the device filter: {os.strerror(err)}" + (f" ({detail[-1]})" if detail else ""))
    try:
        cgroup_fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            attach = ctypes.create_string_buffer(128)
            struct.pack_into("<IIII", attach, 0, cgroup_fd, prog_fd, _BPF_CGROUP_DEVICE, _BPF_F_ALLOW_MULTI)
            if libc.syscall(number, _BPF_PROG_ATTACH, attach, len(attach)) < 0:
                err = ctypes.get_errno()
                raise OSError(err, f"cannot attach the device filter to {cgroup_dir}: {os.strerror(err)}")
        finally:
            os.close(cgroup_fd)
    finally:
        os.close(prog_fd)
