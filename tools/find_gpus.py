"""Which NVIDIA GPUs this machine can run CUDA code on, for the build's SINGA_TENSOR_CUDA=AUTO.

Prints two lines: the CUDA architectures of the GPUs found, comma-separated ("90" or "80,90";
empty when none), then one sentence saying how they were found, or why none
were. The driver library (libcuda.so.1) is asked first: it is what a CUDA program needs at run
time, and it answers without nvidia-smi; nvidia-smi is the second opinion (a driver whose
library is not on the loader's path). Never fails: a broken driver reads as no GPU.

    python tools/find_gpus.py
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys

# CUdevice_attribute values from cuda.h
_MAJOR, _MINOR = 75, 76


def from_driver() -> tuple[list[tuple[str, str]] | None, str]:
    """[(name, "90"), ...] from the CUDA driver API, or None when the driver cannot be used;
    with the reason."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, "libcuda.so.1 does not load"
    if cuda.cuInit(0) != 0:
        return None, "libcuda.so.1 loads, but cuInit fails (no GPU visible to the driver)"
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None, "libcuda.so.1 loads, but it cannot count the GPUs"
    gpus = []
    for i in range(count.value):
        dev, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        name = ctypes.create_string_buffer(256)
        if (cuda.cuDeviceGet(ctypes.byref(dev), i) != 0
                or cuda.cuDeviceGetAttribute(ctypes.byref(major), _MAJOR, dev) != 0
                or cuda.cuDeviceGetAttribute(ctypes.byref(minor), _MINOR, dev) != 0):
            continue
        cuda.cuDeviceGetName(name, len(name), dev)
        gpus.append((name.value.decode(errors="replace") or f"GPU {i}",
                     f"{major.value}{minor.value}"))
    return gpus, "libcuda.so.1"


def from_nvidia_smi() -> tuple[list[tuple[str, str]] | None, str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, "nvidia-smi is not on PATH"
    try:
        out = subprocess.run([exe, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"nvidia-smi does not answer ({e})"
    if out.returncode != 0:
        return None, f"nvidia-smi fails (exit status {out.returncode})"
    gpus = []
    for line in out.stdout.splitlines():
        name, _, cap = line.rpartition(",")
        major, _, minor = cap.strip().partition(".")
        if major.isdigit() and minor.isdigit():
            gpus.append((name.strip(), f"{major}{minor}"))
    return gpus, "nvidia-smi"


def find() -> tuple[list[str], str]:
    """(sorted architectures, how they were found or why there are none)."""
    reasons = []
    for probe in (from_driver, from_nvidia_smi):
        gpus, how = probe()
        if gpus:
            names = ", ".join(f"{name} (sm_{arch})" for name, arch in gpus)
            archs = sorted({arch for _, arch in gpus}, key=int)
            return archs, f"found {len(gpus)} GPU{'s' * (len(gpus) > 1)} through {how}: {names}"
        reasons.append(how if gpus is None else f"{how} lists no GPU")
    return [], "no GPU: " + ", and ".join(reasons)


def main() -> int:
    archs, why = find()
    sys.stdout.write(",".join(archs) + "\n" + why + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
