"""Which BLAS Debian's PyTorch runs its CPU matmuls on, for the peer benchmarks: the
reference BLAS is an order of magnitude slower than OpenBLAS, so a peer must say which it
got. Benchmark-only, like the scripts that import it."""
import ctypes
import ctypes.util
import os
import re
import time


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def loaded_libraries():
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "/" in line and ".so" in line}
    return sorted(paths)


def sgemm_provider(libraries):
    """The file that defines the sgemm_ torch's CPU library calls, or None if it has none.

    dlsym on libtorch_cpu's handle searches it and its dependencies in load order, as its own
    calls resolve; which libraries are merely loaded says little (OpenBLAS's LAPACK drags
    libopenblas in even when sgemm_ comes from the reference libblas)."""
    torch_cpu = [p for p in libraries if os.path.basename(p).startswith("libtorch_cpu")]
    if not torch_cpu:
        return None
    try:
        address = ctypes.cast(ctypes.CDLL(torch_cpu[0]).sgemm_, ctypes.c_void_p).value
    except AttributeError:
        return None
    for libc in (None, ctypes.util.find_library("dl")):
        try:
            dladdr = ctypes.CDLL(libc).dladdr
        except (OSError, AttributeError):
            continue
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        info = DlInfo()
        if dladdr(address, ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(info.dli_fname.decode())
    return None


def gemm_gflops(torch):
    """A 512x512x512 float matmul through torch on the configured threads, best of three."""
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    a @ b
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * 512 ** 3 / best / 1e9


def blas_report(torch, threads):
    """Which BLAS torch's matmuls run on, as a dict; sets OpenBLAS's thread count."""
    config = torch.__config__.show()
    match = re.search(r"BLAS_INFO=([^,\s]+)", config)
    report = {"torch_blas_info": match.group(1) if match else "?", "sgemm_from": None,
              "kind": "unknown", "openblas_config": None, "blas_threads": None}
    torch.ones(8, 8) @ torch.ones(8, 8)
    libraries = loaded_libraries()
    provider = sgemm_provider(libraries)
    report["sgemm_from"] = provider
    lowered = (provider or "").lower()
    if "openblas" in lowered:
        report["kind"] = "OpenBLAS"
    elif "mkl" in lowered or ("libtorch_cpu" in lowered and "mkl" in report["torch_blas_info"]):
        report["kind"] = "MKL"  # PyPI wheels link MKL into libtorch_cpu itself
    elif "blis" in lowered:
        report["kind"] = "BLIS"
    elif re.search(r"/blas/libblas\.so|/libblas\.so\.3\.\d", lowered) or lowered.endswith(
            "libblas.so.3"):
        report["kind"] = "reference"
    if report["kind"] == "OpenBLAS":
        for path in libraries:
            if "openblas" not in os.path.basename(path).lower():
                continue
            lib = ctypes.CDLL(path)
            if not hasattr(lib, "openblas_get_config"):
                continue
            lib.openblas_get_config.restype = ctypes.c_char_p
            # Its pthread pool ignores torch.set_num_threads: size it here as well.
            lib.openblas_set_num_threads(ctypes.c_int(threads))
            report["openblas_config"] = lib.openblas_get_config().decode()
            report["blas_threads"] = lib.openblas_get_num_threads()
            break
    report["gemm_gflops"] = gemm_gflops(torch)
    return report


def describe_blas(report):
    lines = ["BLAS: torch built with BLAS_INFO=%s; sgemm_ from %s"
             % (report["torch_blas_info"], report["sgemm_from"] or "(not found)")]
    if report["kind"] == "OpenBLAS":
        lines.append("BLAS: OpenBLAS (%s), %s thread(s)"
                     % (report["openblas_config"] or "config unknown", report["blas_threads"]))
    elif report["kind"] == "reference":
        lines.append("BLAS: WARNING: the reference (netlib) BLAS. Its sgemm is an order of "
                     "magnitude slower than OpenBLAS, so the timings below are MEANINGLESS as a "
                     "peer; install libopenblas0-pthread (update-alternatives picks it).")
    else:
        lines.append("BLAS: %s" % report["kind"])
    lines.append("BLAS: 512^3 float matmul through torch: %.1f GFLOP/s%s"
                 % (report["gemm_gflops"], "  (WARNING: slow; is this an optimised BLAS?)"
                    if report["gemm_gflops"] < 20 else ""))
    return "\n".join(lines)
