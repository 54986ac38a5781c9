#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on bench_attention's shapes: 16k
tokens (batch = 16384 / seq), 2048 / d heads, bf16, causal and not, with the
flash and cuDNN backends, forward TFLOP/s (4 B H S^2 D, halved when causal)
and backward TFLOP/s (2.5 times the forward's FLOPs).
Also checks loom's convention: is_causal aligns the mask top left."""
import sys

try:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
except Exception as e:  # no torch here: nothing to anchor against
    print(f"torch_attention: PyTorch unavailable ({e})")
    sys.exit(0)

if not torch.cuda.is_available():
    print("torch_attention: no GPU")
    sys.exit(0)

def time_ms(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps

# Optional arguments: the sequence lengths to time (all of bench_attention's by default).
seqs = [int(a) for a in sys.argv[1:]] or [512, 1024, 2048, 4096, 8192, 16384]
for d in (64, 128):
    heads = 2048 // d
    for seq in seqs:
        batch = 16384 // seq
        q, k, v = (torch.randn(batch, heads, seq, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        for causal in (False, True):
            flops = 4 * batch * heads * seq * seq * d * (0.5 if causal else 1.0)
            line = f"torch sdpa bf16 d={d} seq={seq} batch={batch} heads={heads}" + \
                   (" causal" if causal else "")
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                                  ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        ms = time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, is_causal=causal))
                    line += f" {name}_TFLOPs={flops / ms / 1e9:.1f}"
                    with sdpa_kernel(backend):
                        qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
                        o = torch.nn.functional.scaled_dot_product_attention(
                            qg, kg, vg, is_causal=causal)
                        do = torch.randn_like(o)
                        ms = time_ms(lambda: torch.autograd.grad(
                            o, (qg, kg, vg), do, retain_graph=True))
                    line += f" {name}_bwd_TFLOPs={2.5 * flops / ms / 1e9:.1f}"
                except Exception as e:
                    line += f" {name}=unavailable({type(e).__name__})"
            print(line, flush=True)
