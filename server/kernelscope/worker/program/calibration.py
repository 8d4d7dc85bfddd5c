# pyright: basic
"""Measured ceilings of one GPU: n×n matmuls per dtype and a large device-to-device copy."""

from .devices import select_device
from .errors import JobError


def calibrate(torch, req):
    """Measured ceilings: n×n matmuls per dtype and a large device-to-device copy."""
    device = select_device(torch, req.get("device") or "cuda")
    if device.type != "cuda":
        raise JobError("no_cuda", "calibrate measures GPU ceilings; this job's device is the CPU")
    n, reps = int(req.get("size", 8192)), int(req.get("reps", 20))

    def timed(fn):
        for _ in range(3):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / reps

    rates = {}
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for key, dtype, tf32 in (
            ("bf16", torch.bfloat16, False),
            ("fp16", torch.float16, False),
            ("tf32", torch.float32, True),
            ("fp32", torch.float32, False),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=device, dtype=dtype)
            b = torch.randn(n, n, device=device, dtype=dtype)
            rates[key] = 2.0 * n**3 / timed(lambda a=a, b=b: torch.mm(a, b)) / 1e12
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    size = int(req.get("copy_bytes", 2**30))
    src = torch.empty(size, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    copy_s = timed(lambda dst=dst, src=src: dst.copy_(src))
    del src, dst
    torch.cuda.empty_cache()
    props = torch.cuda.get_device_properties(device)
    return {
        "type": "calibration_finished",
        "job_id": req["job_id"],
        "device_name": props.name,
        "total_memory": int(props.total_memory),
        "bf16_tflops": rates["bf16"],
        "fp16_tflops": rates["fp16"],
        "tf32_tflops": rates["tf32"],
        "fp32_tflops": rates["fp32"],
        "copy_gbps": 2.0 * size / copy_s / 1e9,
        "method": "CUDA events over %d reps after 3 warm-ups: %dx%d matmuls (random data), "
        "a %d MiB device-to-device copy counting bytes read + written" % (reps, n, n, size >> 20),
    }
