#!/usr/bin/env python3
"""PyTorch on the small shapes of bench_small_shapes, in the same device call,
and the two side by side.

  python3 bench/torch_small_shapes.py [bench_small_shapes.json]

Each case runs REPEATS times inside one captured CUDA graph, the best form a
PyTorch user has for ops this small (no Python or dispatch cost between
kernels); the figure is the graph's replay time over REPEATS, the median of
RUNS replays, in microseconds. loom's side (bench_small_shapes) times a
compiled graph of the same number of copies of its op. Each case is written
as a PyTorch user would write it: F.linear for a layer with its bias, the
backward ops autograd itself runs (threshold_backward, the log-softmax
backward), an in-place add_ with alpha for SGD.

With loom's JSON, prints: case, loom us, torch us, and torch / loom (above 1:
loom is faster; the issue's bound is loom within 2x, i.e. a ratio >= 0.5).
"""
import json
import sys

REPEATS = 64
RUNS = 20

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_small_shapes: PyTorch is not installed; no anchors")
    sys.exit(0)


def rand(*shape):
    return torch.rand(*shape, device="cuda") * 2 - 1


def graph_us(fn):
    """Median replay time of a graph holding REPEATS calls of fn, over REPEATS."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPEATS):
            fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(RUNS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / REPEATS)
    times.sort()
    return times[len(times) // 2]


def matmul(m, n, k, a_t=False, b_t=False):
    a = rand(k, m).t() if a_t else rand(m, k)
    b = rand(n, k).t() if b_t else rand(k, n)
    c = torch.empty(m, n, device="cuda")
    return lambda: torch.matmul(a, b, out=c)


def linear(m, n, k, relu):
    x, w, bias = rand(m, k), rand(n, k), rand(n)   # nn.Linear keeps w as [out, in]
    if relu:
        return lambda: torch.relu(F.linear(x, w, bias))
    return lambda: F.linear(x, w, bias)


def column_sum(rows, cols, dim):
    x = rand(rows, cols)
    out = torch.empty(cols if dim == 0 else rows, device="cuda")
    return lambda: torch.sum(x, dim, out=out)


def cross_entropy():
    logits, labels = rand(256, 10), torch.randint(0, 10, (256,), device="cuda")
    return lambda: F.cross_entropy(logits, labels)


def cross_entropy_backward():
    # What autograd runs for F.cross_entropy's backward: nll_loss's backward,
    # then log_softmax's.
    logits, labels = rand(256, 10), torch.randint(0, 10, (256,), device="cuda")
    logp = F.log_softmax(logits, dim=1)
    grad_loss = torch.ones((), device="cuda")

    def run():
        g = torch.ops.aten.nll_loss_backward(grad_loss, logp, labels, None, 1, -100,
                                             torch.ones((), device="cuda"))
        return torch.ops.aten._log_softmax_backward_data(g, logp, 1, torch.float32)
    return run


def relu_backward():
    grad, x = rand(256, 1024), rand(256, 1024)
    return lambda: torch.ops.aten.threshold_backward(grad, x, 0)


def bias_add():
    h, bias = rand(256, 1024), rand(1024)
    out = torch.empty(256, 1024, device="cuda")
    return lambda: torch.add(h, bias, out=out)


def sgd(*shape):
    p, g = rand(*shape), rand(*shape)
    return lambda: p.add_(g, alpha=-1e-6)


CASES = {
    "BM_Linear_fc1": lambda: linear(256, 1024, 512, True),
    "BM_Linear_fc2": lambda: linear(256, 10, 1024, False),
    "BM_Matmul_dW2": lambda: matmul(1024, 10, 256, a_t=True),
    "BM_Matmul_dh": lambda: matmul(256, 1024, 10, b_t=True),
    "BM_Matmul_dW1": lambda: matmul(512, 1024, 256, a_t=True),
    "BM_Matmul_n48": lambda: matmul(256, 48, 1024),
    "BM_Matmul_n64": lambda: matmul(256, 64, 1024),
    "BM_Matmul_m64": lambda: matmul(64, 1024, 1024),
    "BM_Matmul_splitk_64": lambda: matmul(64, 64, 8192),
    "BM_Matmul_splitk_128": lambda: matmul(128, 128, 16384),
    "BM_ColumnSum_256x10": lambda: column_sum(256, 10, 0),
    "BM_ColumnSum_256x1024": lambda: column_sum(256, 1024, 0),
    "BM_ColumnSum_16384x64": lambda: column_sum(16384, 64, 0),
    "BM_RowSum_16384x64": lambda: column_sum(16384, 64, 1),
    "BM_CrossEntropy_256x10": cross_entropy,
    "BM_CrossEntropyBackward_256x10": cross_entropy_backward,
    "BM_ReluBackward_256x1024": relu_backward,
    "BM_BiasAdd_256x1024": bias_add,
    "BM_Sgd_512x1024": lambda: sgd(512, 1024),
    "BM_Sgd_1024x10": lambda: sgd(1024, 10),
    "BM_Sgd_1024": lambda: sgd(1024),
}


def loom_figures(path):
    with open(path) as f:
        data = json.load(f)
    figures = {}
    for b in data.get("benchmarks", []):
        if not b.get("error_occurred") and "loom_us" in b:
            figures[b["name"].split("/")[0]] = b["loom_us"]
    return figures


def main(argv):
    if not torch.cuda.is_available():
        print("torch_small_shapes: no GPU; no anchors")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # loom's f32 matmul is f32
    loom = loom_figures(argv[1]) if len(argv) > 1 else {}
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, "
          f"{REPEATS} copies a graph, median of {RUNS} replays")
    print(f"{'case':<34} {'loom us':>9} {'torch us':>9} {'torch/loom':>10}")
    worst = None
    for name, make in CASES.items():
        t = graph_us(make())
        mine = loom.get(name)
        if mine is None:
            print(f"{name:<34} {'-':>9} {t:9.2f} {'-':>10}")
            continue
        ratio = t / mine
        worst = ratio if worst is None else min(worst, ratio)
        print(f"{name:<34} {mine:9.2f} {t:9.2f} {ratio:10.2f}")
    if worst is not None:
        print(f"lowest torch/loom: {worst:.2f} (the bound: loom within 2x of PyTorch, >= 0.50)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
