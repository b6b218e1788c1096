"""CUDA arrays through DLPack (device kDLCUDA): sol.* views them as cuda:N tensors, runs on the
producer's current stream (torch's), and returns outputs on the same device.

Without a GPU only the error path runs: an array that says it lives on CUDA device 0 (a DLPack
capsule made here with ctypes, its memory never touched) is refused with discovery's reason.
The gpu-marked tests need torch with a CUDA device and skip otherwise.
"""
import ctypes

import numpy as np
import pytest

import sol

K_DL_CPU, K_DL_CUDA, K_DL_VULKAN = 1, 2, 7


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class FakeDeviceArray:
    """A float32 array of `n` elements that claims to live on (device_type, device_id); its data
    pointer is host memory that the consumer must never read, since it refuses the array first."""

    def __init__(self, device_type, device_id, n=8):
        self.keep = np.zeros(n, np.float32)
        self.shape = (ctypes.c_int64 * 1)(n)
        self.device = (device_type, device_id)
        self.deleter = _DELETER(lambda _: None)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        m = _DLManagedTensor()
        m.dl_tensor = _DLTensor(self.keep.ctypes.data, _DLDevice(*self.device), 1, _DLDataType(2, 32, 1),
                                self.shape, None, 0)
        m.deleter = self.deleter
        self.managed = m  # alive as long as the capsule may be read
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new_capsule(ctypes.addressof(m), b"dltensor", None)


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(_torch_cuda(), reason="this machine has a CUDA device: the refusal is for machines without")
def test_cuda_array_without_a_device_is_refused_with_the_reason():
    fake = FakeDeviceArray(K_DL_CUDA, 0)
    with pytest.raises(sol.Error, match=r"copy: src lives on cuda:0 but there is no CUDA device: \S"):
        sol.copy(fake)
    with pytest.raises(sol.Error, match=r"cast: src lives on cuda:0 but there is no CUDA device"):
        sol.cast(fake, dtype="bf16")
    host = np.zeros(8, np.float32)
    with pytest.raises(sol.Error, match=r"copy: out lives on cuda:0 but there is no CUDA device"):
        sol.copy(host, out=FakeDeviceArray(K_DL_CUDA, 0))


@pytest.mark.skipif(_torch_cuda(), reason="this machine has a CUDA device: the refusal is for machines without")
def test_check_grouped_layouts_names_the_device_it_cannot_reach():
    with pytest.raises(sol.Error, match=r"check_grouped_layouts: cuda:0 but \S"):
        sol.check_grouped_layouts()
    with pytest.raises(sol.Error, match=r"check_grouped_layouts: cuda:3 but \S"):
        sol.check_grouped_layouts("cuda:3")


def test_check_grouped_layouts_on_the_host_is_a_no_op_and_bad_names_are_refused():
    assert sol.check_grouped_layouts("cpu") is None
    with pytest.raises(sol.Error, match=r"expected cpu, cuda or cuda:N but got 'gpu0'"):
        sol.check_grouped_layouts("gpu0")


def test_other_device_types_are_refused_by_name():
    with pytest.raises(sol.Error, match=r"copy: src lives on DLPack device type 7 but Sol takes host \(CPU, type 1\) "
                                        r"or CUDA \(type 2\) memory"):
        sol.copy(FakeDeviceArray(K_DL_VULKAN, 0))


def test_a_host_dlpack_array_still_works():
    fake = FakeDeviceArray(K_DL_CPU, 0)
    fake.keep[:] = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(sol.copy(fake), np.arange(8, dtype=np.float32))


gpu = pytest.mark.skipif(not _torch_cuda(), reason="needs torch with a CUDA device")


@gpu
@pytest.mark.gpu
def test_torch_cuda_copy_and_cast_stay_on_the_device():
    import torch
    for index in range(torch.cuda.device_count()):
        dev = torch.device("cuda", index)
        x = torch.randn(1031, 7, device=dev)
        y = sol.copy(x)
        assert y.device == dev and y.dtype == torch.float32
        assert torch.equal(y, x)
        z = sol.cast(x, dtype="bf16")
        assert z.device == dev and z.dtype == torch.bfloat16
        assert torch.equal(z, x.to(torch.bfloat16))


@gpu
@pytest.mark.gpu
def test_torch_cuda_runs_on_the_current_stream():
    import torch
    s = torch.cuda.Stream()
    x = torch.empty(1 << 22, device="cuda")
    out = torch.empty_like(x)
    with torch.cuda.stream(s):
        x.fill_(3.0)            # enqueued on s
        sol.copy(x, out=out)    # must be ordered after the fill: the same stream
        out2 = out * 2          # and before this
    s.synchronize()
    assert torch.all(out2 == 6.0)


@gpu
@pytest.mark.gpu
def test_torch_mixed_devices_are_refused():
    import torch
    with pytest.raises(sol.Error):
        sol.copy(torch.zeros(8, device="cuda"), out=torch.zeros(8))


@gpu
@pytest.mark.gpu
def test_torch_cuda_bad_grouped_layout_is_named_by_the_check():
    import torch
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    a = torch.randn(256, 128, device=dev).to(torch.bfloat16)
    b = torch.randn(2, 64, 128, device=dev).to(torch.bfloat16)
    layout = torch.zeros(256, dtype=torch.int32, device=dev)
    layout[128:] = 1
    sol.grouped_gemm_contiguous(a, b, layout)
    sol.check_grouped_layouts("cuda:0")   # a good layout: nothing recorded
    layout[100] = 1                        # expert 1 inside a tile of expert 0 (64 or 128 rows)
    d = sol.grouped_gemm_contiguous(a, b, layout)
    with pytest.raises(sol.Error, match=r"grouped_layout\[100\] = 1"):
        sol.check_grouped_layouts("cuda:0")
    sol.check_grouped_layouts("cuda:0")   # the check cleared the record
    ref = (a[:128].float() @ b[0].float().T)
    assert torch.equal(d[100], torch.zeros_like(d[100]))  # that row was not written (zeros on allocation)
    rows = [r for r in range(128) if r != 100]
    err = (d[rows].float() - ref[rows]).norm() / ref[rows].norm()
    assert err < 1e-2
