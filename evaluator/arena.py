"""Shared memory between the judge and a worker: one arena, handed over as a file descriptor.

The judge owns the arena. It writes each call's inputs into it and reserves slots there for the
outputs; the worker maps the same memory, calls the kernel on tensors that view it, and copies
what the kernel returns into the slots. So inputs and outputs cross without pickle (a worker
cannot make the judge run code) and without a shared directory (the worker's sandbox has none):
the arena travels as an inherited descriptor.

- On the CPU (Triton's interpreter) the arena is a ``memfd`` mapped by both processes.
- On a GPU it is device memory from the CUDA driver's virtual memory API, exported as a POSIX
  file descriptor (``cuMemExportToShareableHandle``) and imported by the worker. Unlike legacy
  CUDA IPC handles, a descriptor needs no shared PID or IPC namespace, so it works from inside
  bubblewrap's namespaces.
"""

from __future__ import annotations

import ctypes
import math
import mmap
from typing import Any

import torch

from evaluator.inputs import TORCH_DTYPES
from evaluator.protocol import TensorRef
from evaluator.shm import ALIGN, host_memfd, round_size

_DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}


class Arena:
    """A byte buffer both sides map, with a bump allocator for tensors (judge side)."""

    def __init__(self, base: torch.Tensor, fd: int, size: int, keep: Any = None):
        self.base = base  # uint8 tensor over the whole arena
        self.fd = fd
        self.size = size
        self._keep = keep  # the mapping object that must outlive ``base``
        self.used = 0

    # --- judge side --------------------------------------------------------------------
    def reset(self) -> None:
        self.used = 0

    def alloc(self, shape: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype) -> TensorRef:
        span = 1 + sum((s - 1) * st for s, st in zip(shape, stride, strict=True)) if all(shape) else 0
        nbytes = max(span, 1) * dtype.itemsize
        offset = -(-self.used // ALIGN) * ALIGN
        if offset + nbytes > self.size:
            raise MemoryError(f"arena of {self.size} bytes is full ({offset + nbytes} needed)")
        self.used = offset + nbytes
        return TensorRef(offset=offset, shape=list(shape), stride=list(stride), dtype=_DTYPE_NAMES[dtype])

    def place(self, value: torch.Tensor) -> tuple[TensorRef, torch.Tensor]:
        """Copy ``value`` into a fresh region (same shape and strides); returns its ref and view."""
        stride = value.stride() if value.numel() else tuple(_contiguous_strides(value.shape))
        ref = self.alloc(tuple(value.shape), tuple(stride), value.dtype)
        view = self.view(ref)
        view.copy_(value)
        return ref, view

    def slot(self, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[TensorRef, torch.Tensor]:
        """An output slot, contiguous, filled with a poison value so a skipped copy shows."""
        ref = self.alloc(shape, tuple(_contiguous_strides(shape)), dtype)
        view = self.view(ref)
        if dtype.is_floating_point:
            view.fill_(float("nan"))
        elif dtype != torch.bool:
            view.fill_(torch.iinfo(dtype).min if dtype not in (torch.uint8,) else 255)
        return ref, view

    # --- both sides ----------------------------------------------------------------------
    def view(self, ref: TensorRef) -> torch.Tensor:
        """The tensor ``ref`` names, viewing the arena (validated: a bad ref raises ValueError)."""
        dtype = TORCH_DTYPES.get(ref.dtype)
        if dtype is None or len(ref.shape) != len(ref.stride) or min(ref.shape + ref.stride, default=0) < 0:
            raise ValueError(f"invalid tensor reference {ref}")
        span = 1 + sum((s - 1) * st for s, st in zip(ref.shape, ref.stride, strict=True)) if all(ref.shape) else 0
        nbytes = max(span, 1) * dtype.itemsize
        if ref.offset % ALIGN or ref.offset + nbytes > self.size:
            raise ValueError(f"tensor reference outside the arena: {ref}")
        flat = self.base[ref.offset:ref.offset + nbytes].view(dtype)
        return flat.as_strided(ref.shape, ref.stride)


def _contiguous_strides(shape: tuple[int, ...] | torch.Size) -> list[int]:
    strides, acc = [], 1
    for d in reversed(list(shape)):
        strides.append(acc)
        acc *= max(d, 1)
    return list(reversed(strides))


# --- CPU: memfd ------------------------------------------------------------------------
def host_arena(size: int) -> Arena:
    return map_host(host_memfd(size), size)


def map_host(fd: int, size: int) -> Arena:
    """Map the memfd ``fd`` (both sides use this on the CPU)."""
    mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    base = torch.frombuffer(mm, dtype=torch.uint8)
    return Arena(base, fd, size, keep=mm)


# --- GPU: CUDA virtual memory, exported as a file descriptor -------------------------------
class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_PINNED, _POSIX_FD, _LOC_DEVICE, _RW = 1, 1, 1, 3


class _CudaArray:
    """``__cuda_array_interface__`` over a raw device pointer, for ``torch.as_tensor``."""

    def __init__(self, ptr: int, size: int):
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None}


def _driver() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    for name in ("cuMemCreate", "cuMemAddressReserve", "cuMemMap", "cuMemSetAccess",
                 "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle",
                 "cuMemGetAllocationGranularity"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"CUDA driver call {what} failed with CUresult {status}")


def _map_device(lib: ctypes.CDLL, handle: ctypes.c_uint64, size: int, device: int) -> int:
    ptr = ctypes.c_uint64()
    _check(lib.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                   ctypes.c_uint64(0), ctypes.c_uint64(0)), "cuMemAddressReserve")
    _check(lib.cuMemMap(ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, ctypes.c_uint64(0)), "cuMemMap")
    desc = _AccessDesc(_Location(_LOC_DEVICE, device), _RW)
    _check(lib.cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(desc), ctypes.c_size_t(1)), "cuMemSetAccess")
    return ptr.value


def device_arena(size: int, device: torch.device) -> Arena:
    """Judge side: allocate, map and export device memory (the CUDA context must exist)."""
    torch.zeros(1, device=device)  # make torch's primary context current on this thread
    lib = _driver()
    index = device.index or 0
    prop = _AllocProp(_PINNED, _POSIX_FD, _Location(_LOC_DEVICE, index), None, _AllocFlags())
    gran = ctypes.c_size_t()
    _check(lib.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0),
           "cuMemGetAllocationGranularity")
    size = math.ceil(size / gran.value) * gran.value
    handle = ctypes.c_uint64()
    _check(lib.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_uint64(0)),
           "cuMemCreate")
    ptr = _map_device(lib, handle, size, index)
    fd = ctypes.c_int()
    _check(lib.cuMemExportToShareableHandle(ctypes.byref(fd), handle, _POSIX_FD, ctypes.c_uint64(0)),
           "cuMemExportToShareableHandle")
    base = torch.as_tensor(_CudaArray(ptr, size), device=device)
    return Arena(base, fd.value, size, keep=handle)


def open_arena(fd: int, size: int, device: torch.device) -> Arena:
    """Worker side: map the arena the judge handed over as descriptor ``fd``."""
    if device.type == "cpu":
        return map_host(fd, size)
    torch.zeros(1, device=device)
    lib = _driver()
    handle = ctypes.c_uint64()
    _check(lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD),
           "cuMemImportFromShareableHandle")
    ptr = _map_device(lib, handle, size, device.index or 0)
    return Arena(torch.as_tensor(_CudaArray(ptr, size), device=device), fd, size, keep=handle)


def new_arena(size: int, device: torch.device) -> Arena:
    size = round_size(size)
    return host_arena(size) if device.type == "cpu" else device_arena(size, device)
