#!/usr/bin/env python3
"""PyTorch's figures for the ops loom's benchmarks compare against, timed on
the same GPU in the same device call (scripts/gpu-check.sh runs this after
the benchmark programs). Prints one line a figure: name, microseconds, and
for memory-bound maps the GB/s and the ratio to a copy of the same bytes.

  maps          exp, log, ..., where on 2^26 f32 elements (bench_elementwise's size)
  cross_entropy log_softmax + nll_loss forward and backward at 8192 x 32000
                (f32, bf16): the fused target is >= 2x this
  mlp_step      the MLP training step of samples/mlp_training (256 x 512 ->
                1024 -> 10, f32, SGD), eager and replayed as a CUDA graph
  maps_2_30     exp, abs and add on 2^30 elements, f32 and bf16, against
                PyTorch's own copy of the same bytes (bench_elementwise's size)
  index         bench_index's shapes: index_select, argmax/argmin, gather,
                scatter_add_, one-hot rows (scatter_ of ones into zeros:
                F.one_hot gives i64, a float one-hot costs a cast besides)

  python3 bench/torch_anchors.py [section ...]   (default: all)
"""
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_anchors: PyTorch is not installed; no anchors")
    sys.exit(0)


def time_us(fn, warmup=3, reps=20):
    """Median of `reps` runs of fn, in microseconds (CUDA events)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    return times[len(times) // 2]


def maps():
    n = 1 << 26
    x = torch.rand(n, device="cuda") + 0.05
    y = torch.rand(n, device="cuda") + 0.05
    m = (torch.rand(n, device="cuda") > 0.5).float()
    out = torch.empty_like(x)
    copy_us = time_us(lambda: out.copy_(x))
    copy_gbps = 2 * 4 * n / copy_us / 1e3
    unary = {"exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
             "tanh": torch.tanh, "sigmoid": torch.sigmoid, "abs": torch.abs, "neg": torch.neg}
    binary = {"sub": torch.sub, "div": torch.div, "minimum": torch.minimum,
              "maximum": torch.maximum, "pow": torch.pow}
    for name, fn in unary.items():
        us = time_us(lambda: fn(x, out=out))
        gbps = 2 * 4 * n / us / 1e3
        print(f"torch map {name} f32 2^26: {us:.1f} us {gbps:.0f} GB/s ratio {gbps / copy_gbps:.3f}")
    for name, fn in binary.items():
        us = time_us(lambda: fn(x, y, out=out))
        gbps = 3 * 4 * n / us / 1e3
        print(f"torch map {name} f32 2^26: {us:.1f} us {gbps:.0f} GB/s ratio {gbps / copy_gbps:.3f}")
    mask = torch.empty(n, device="cuda", dtype=torch.bool)
    us = time_us(lambda: torch.gt(x, y, out=mask))
    print(f"torch map gt f32->bool 2^26: {us:.1f} us")
    us = time_us(lambda: torch.where(m.bool(), x, y, out=out))
    print(f"torch map where f32 2^26 (with the mask's cast): {us:.1f} us")
    print(f"torch copy f32 2^26: {copy_us:.1f} us {copy_gbps:.0f} GB/s")


def maps_2_30():
    n = 1 << 30
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        x = (torch.rand(n, device="cuda", dtype=dtype) + 0.05)
        y = (torch.rand(n, device="cuda", dtype=dtype) + 0.05)
        out = torch.empty_like(x)
        size = x.element_size()
        copy_us = time_us(lambda: out.copy_(x), warmup=2, reps=9)
        copy_gbps = 2 * size * n / copy_us / 1e3
        for op, fn, inputs in (("exp", lambda: torch.exp(x, out=out), 1),
                               ("abs", lambda: torch.abs(x, out=out), 1),
                               ("add", lambda: torch.add(x, y, out=out), 2)):
            us = time_us(fn, warmup=2, reps=9)
            gbps = (inputs + 1) * size * n / us / 1e3
            print(f"torch map {op} {name} 2^30: {us:.1f} us {gbps:.0f} GB/s "
                  f"ratio {gbps / copy_gbps:.3f} (copy {copy_gbps:.0f} GB/s)")
        del x, y, out
        torch.cuda.empty_cache()


def index():
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        for vocab, width, tokens in ((50000, 512, 8192), (50000, 1024, 65536)):
            table = torch.randn(vocab, width, device="cuda", dtype=dtype)
            ids = torch.randint(0, vocab, (tokens,), device="cuda")
            out = torch.empty(tokens, width, device="cuda", dtype=dtype)
            us = time_us(lambda: torch.index_select(table, 0, ids, out=out))
            print(f"torch index_select {name} [{vocab}, {width}] x {tokens}: {us:.1f} us")
        logits = torch.randn(8192, 32000, device="cuda", dtype=dtype)
        for op in ("argmax", "argmin"):
            fn = getattr(torch, op)
            us = time_us(lambda: fn(logits, dim=1))
            print(f"torch {op} {name} [8192, 32000]: {us:.1f} us")
        del table, out, logits
    x = torch.randn(8192, 4096, device="cuda")
    idx = torch.randint(0, 4096, (8192, 4096), device="cuda")
    out = torch.empty(8192, 4096, device="cuda")
    print(f"torch gather f32 [8192, 4096] picking 4096 a row: "
          f"{time_us(lambda: torch.gather(x, 1, idx, out=out)):.1f} us")
    src = torch.randn(8192, 4096, device="cuda")
    print(f"torch scatter_add_ f32 into [8192, 4096], 4096 a row: "
          f"{time_us(lambda: x.scatter_add_(1, idx, src)):.1f} us")
    for rows, classes in ((65536, 1000), (256, 10)):
        labels = torch.randint(0, classes, (rows, 1), device="cuda")
        hot = torch.empty(rows, classes, device="cuda")
        us = time_us(lambda: hot.zero_().scatter_(1, labels, 1.0))
        us_cast = time_us(lambda: F.one_hot(labels[:, 0], classes).float())
        print(f"torch one_hot f32 [{rows}, {classes}]: zero_+scatter_ {us:.1f} us, "
              f"F.one_hot().float() {us_cast:.1f} us")


def cross_entropy():
    for dtype in (torch.float32, torch.bfloat16):
        logits = torch.randn(8192, 32000, device="cuda", dtype=dtype, requires_grad=True)
        labels = torch.randint(0, 32000, (8192,), device="cuda")

        def forward():
            return F.nll_loss(F.log_softmax(logits, dim=-1), labels)

        def both():
            logits.grad = None
            forward().backward()

        fwd = time_us(lambda: forward())
        total = time_us(both)
        name = "f32" if dtype == torch.float32 else "bf16"
        print(f"torch cross_entropy {name} 8192x32000: forward {fwd:.1f} us, forward+backward {total:.1f} us")


def mlp_step():
    torch.manual_seed(0)
    B, D, H, C = 256, 512, 1024, 10
    x = torch.randn(B, D, device="cuda")
    y = torch.randint(0, C, (B,), device="cuda")
    w1 = (torch.randn(D, H, device="cuda") * (2.0 / D) ** 0.5).requires_grad_()
    b1 = torch.zeros(H, device="cuda", requires_grad=True)
    w2 = (torch.randn(H, C, device="cuda") * (1.0 / H) ** 0.5).requires_grad_()
    b2 = torch.zeros(C, device="cuda", requires_grad=True)
    lr = torch.tensor(0.1, device="cuda")
    params = [w1, b1, w2, b2]

    def step():
        h = torch.relu(x @ w1 + b1)
        loss = F.cross_entropy(h @ w2 + b2, y)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(lr * g)
        return loss

    eager = time_us(step, warmup=10, reps=100)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    replay = time_us(graph.replay, warmup=10, reps=100)
    print(f"torch mlp_step 256x512->1024->10 f32: eager {eager:.1f} us, cuda graph replay {replay:.1f} us")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        print("torch_anchors: no GPU; no anchors")
        sys.exit(0)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    sections = {"maps": maps, "cross_entropy": cross_entropy, "mlp_step": mlp_step,
                "maps_2_30": maps_2_30, "index": index}
    for name in sys.argv[1:] or sections:
        sections[name]()
