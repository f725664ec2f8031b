"""PyTorch's side of bench/gpu_step.sh: one train-step time on the GPU.

    python3 bench/gpu_step.py MODEL BATCH MODE DTYPE [STEPS]

MODEL: mlp_small_adam | mlp_512_adam | mlp_1024_adam | cnn | transformer (the models of
bench/models/, built by bench/compare.py's definitions); MODE: eager | reduce-overhead
(torch.compile); DTYPE: fp32 (TF32 off) | bf16 (autocast). Prints "ms_per_step T": the wall time
of STEPS steps (default 100) after warm-up, synchronised once at the end.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from compare import cnn_module, mlp_module, transformer_module  # noqa: E402

MODELS = {
    "mlp_small_adam": (lambda: mlp_module([64, 256, 256, 8]), (64,), "ce", "adam"),
    "mlp_512_adam": (lambda: mlp_module([784, 512, 512, 10]), (784,), "ce", "adam"),
    "mlp_1024_adam": (lambda: mlp_module([784, 1024, 1024, 1024, 10]), (784,), "ce", "adam"),
    "cnn": (cnn_module, (1, 28, 28), "ce", "sgd"),
    "transformer": (transformer_module, (128, 256), "mse", "adam"),
}


def main():
    name, batch, mode, dtype = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 100
    make, shape, loss_kind, opt_kind = MODELS[name]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = make().to(dev)
    opt = (torch.optim.Adam(model.parameters(), lr=1e-3 if loss_kind == "ce" else 1e-4)
           if opt_kind == "adam" else torch.optim.SGD(model.parameters(), lr=0.01))
    x = torch.randn(batch, *shape, device=dev)
    y = (torch.randint(0, 8, (batch,), device=dev) if loss_kind == "ce"
         else torch.randn(batch, *shape, device=dev))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            out = model(x)
            loss = F.cross_entropy(out, y) if loss_kind == "ce" else F.mse_loss(out.float(), y)
        loss.backward()
        opt.step()
        return loss

    if mode == "reduce-overhead":
        step = torch.compile(step, mode="reduce-overhead")
    for _ in range(30):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    print(f"ms_per_step {(time.perf_counter() - t0) * 1e3 / steps:.4f}")


if __name__ == "__main__":
    main()
