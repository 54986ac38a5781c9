#!/usr/bin/env python3
"""loom's flash attention against PyTorch's scaled_dot_product_attention on
the very same inputs: random q, k, v and dout made here, run through loom by
the attention_files program (forward and backward), compared with torch's
out, dq, dk, dv (autograd through SDPA, math in f32 from the same 16-bit
inputs) and the log-sum-exp of the scaled scores. Errors are measured against
each result's largest magnitude: within 1e-2 for bf16, 5e-3 for f16.
  torch_attention_check.py PATH/TO/attention_files
Prints one line a case and exits 1 if any case fails."""
import os
import subprocess
import sys
import tempfile

try:
    import torch
except Exception as e:  # no torch here: nothing to compare against
    print(f"torch_attention_check: PyTorch unavailable ({e})")
    sys.exit(0)

if not torch.cuda.is_available():
    print("torch_attention_check: no GPU")
    sys.exit(0)

program = sys.argv[1] if len(sys.argv) > 1 else "build-gpu/bench/attention_files"
types = {"bf16": torch.bfloat16, "f16": torch.float16}
tolerance = {"bf16": 1e-2, "f16": 5e-3}
# (B, H, Sq, Sk, D, causal): tails, Sq != Sk, causal (top left, as torch's is_causal).
cases = [(2, 4, 256, 256, 64, False), (1, 3, 200, 333, 128, False), (2, 2, 300, 300, 128, True),
         (1, 2, 129, 400, 64, True), (1, 2, 1024, 1024, 128, True)]

def main():
    failed = 0
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    for dtype_name, dtype in types.items():
        for b, h, sq, sk, d, causal in cases:
            q = torch.rand(b, h, sq, d, device="cuda") * 2 - 1
            k = torch.rand(b, h, sk, d, device="cuda") * 2 - 1
            v = torch.rand(b, h, sk, d, device="cuda") * 2 - 1
            dout = torch.rand(b, h, sq, d, device="cuda") * 2 - 1
            q, k, v, dout = (x.to(dtype) for x in (q, k, v, dout))
            with tempfile.TemporaryDirectory() as folder:
                for name, x in (("q", q), ("k", k), ("v", v), ("dout", dout)):
                    with open(f"{folder}/{name}.bin", "wb") as f:
                        f.write(bytes(x.cpu().contiguous().view(torch.uint8).flatten().tolist()))
                run = subprocess.run([program, folder, str(b), str(h), str(sq), str(sk), str(d),
                                      dtype_name, "1" if causal else "0"],
                                     capture_output=True, text=True)
                if run.returncode != 0:
                    print(f"FAIL {dtype_name} {b}x{h} sq {sq} sk {sk} d {d}: {run.stderr.strip()}")
                    failed += 1
                    continue
                def load(name, shape, as_type):
                    with open(f"{folder}/{name}.bin", "rb") as f:
                        raw = torch.frombuffer(bytearray(f.read()), dtype=as_type)
                    return raw.reshape(shape).to("cuda").float()
                got = {"out": load("out", (b, h, sq, d), dtype),
                       "lse": load("lse", (b, h, sq), torch.float32),
                       "dq": load("dq", (b, h, sq, d), dtype),
                       "dk": load("dk", (b, h, sk, d), dtype),
                       "dv": load("dv", (b, h, sk, d), dtype)}
            qf, kf, vf = (x.float().requires_grad_() for x in (q, k, v))
            out = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=causal)
            dq, dk, dv = torch.autograd.grad(out, (qf, kf, vf), dout.float())
            scores = (q.float() @ k.float().transpose(-1, -2)) / d ** 0.5
            if causal:
                mask = torch.ones(sq, sk, device="cuda", dtype=torch.bool).tril()
                scores = scores.masked_fill(~mask, float("-inf"))
            want = {"out": out.detach(), "lse": torch.logsumexp(scores, dim=-1),
                    "dq": dq, "dk": dk, "dv": dv}
            worst = {}
            for name in want:
                largest = want[name].abs().max().item()
                worst[name] = ((got[name] - want[name]).abs().max().item() / max(largest, 1e-3))
            ok = all(worst[n] <= (1e-3 if n == "lse" else tolerance[dtype_name]) for n in worst)
            failed += 0 if ok else 1
            print(("ok  " if ok else "FAIL") + f" {dtype_name} {b}x{h} sq {sq} sk {sk} d {d}" +
                  (" causal" if causal else "") + " worst/largest: " +
                  " ".join(f"{n} {worst[n]:.2e}" for n in worst), flush=True)
    sys.exit(1 if failed else 0)

main()
