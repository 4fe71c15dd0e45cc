"""Anchor benchmark: DP-SGD step throughput of Opacus (PyTorch, CPU) on the reference workloads of docs/benchmarks.md.
usage: bench_opacus.py THREADS [workload ...]; prints one JSON line per (workload, mode)."""
import json, os, sys, time, warnings
import torch, torch.nn as nn
warnings.filterwarnings("ignore")
from opacus import GradSampleModule
from opacus.optimizers import DPOptimizer

def mnist_cnn():  # the small MNIST CNN of the DP-SGD literature (Papernot et al. 2021; Opacus/TF Privacy examples)
    return nn.Sequential(nn.Conv2d(1, 16, 8, 2, padding=3), nn.Tanh(), nn.MaxPool2d(2, 1),
                         nn.Conv2d(16, 32, 4, 2), nn.Tanh(), nn.MaxPool2d(2, 1), nn.Flatten(),
                         nn.Linear(32 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))

def cifar_cnn():  # tempered-sigmoid CIFAR-10 CNN (Papernot et al. 2021)
    L = []
    c = 3
    for out in (32, 64, 128):
        L += [nn.Conv2d(c, out, 3, padding=1), nn.Tanh(), nn.Conv2d(out, out, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2)]
        c = out
    return nn.Sequential(*L, nn.Flatten(), nn.Linear(128 * 4 * 4, 128), nn.Tanh(), nn.Linear(128, 10))

class BasicBlock(nn.Module):  # ResNet basic block, GN for BN, option-A shortcut (He et al. 2016, 4.1-4.2)
    def __init__(self, cin, cout, stride):
        super().__init__()
        gn = lambda c: nn.GroupNorm(min(16, c // 4), c)
        self.f = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, padding=1), gn(cout), nn.ReLU(),
                               nn.Conv2d(cout, cout, 3, padding=1), gn(cout))
        self.stride, self.pad = stride, cout - cin

    def forward(self, x):
        s = x[:, :, ::self.stride, ::self.stride]
        if self.pad:
            s = nn.functional.pad(s, (0, 0, 0, 0, 0, self.pad))  # new channels zero, at the end
        return torch.relu(self.f(x) + s)

def resnet20_gn():  # dpx's resnet20_gn: 270,410 parameters
    L, c = [nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU()], 16
    for stage, out in enumerate((16, 32, 64)):
        for b in range(3):
            L.append(BasicBlock(c, out, 2 if stage and not b else 1))
            c = out
    return nn.Sequential(*L, nn.AvgPool2d(8), nn.Flatten(), nn.Linear(64, 10))

WORKLOADS = {
    "logreg_mnist": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 10)), (1, 28, 28), 256),
    "mlp_mnist": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)), (1, 28, 28), 256),
    "cnn_mnist": (mnist_cnn, (1, 28, 28), 256),
    "cnn_cifar10": (cifar_cnn, (3, 32, 32), 128),
    "resnet20_gn_cifar10": (resnet20_gn, (3, 32, 32), 128),
}

def bench(name, mode, steps=20, warm=3):
    make, shape, B = WORKLOADS[name]
    torch.manual_seed(0)
    model = make()
    x = torch.randn(B, *shape); y = torch.randint(0, 10, (B,))
    lossf = nn.CrossEntropyLoss()
    if mode == "nonprivate":
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def step():
            opt.zero_grad(); lossf(model(x), y).backward(); opt.step()
    else:
        gsm = GradSampleModule(model) if mode == "opacus_hooks" else None
        if mode == "opacus_ghost":
            from opacus.grad_sample import GradSampleModuleFastGradientClipping
            from opacus.optimizers import DPOptimizerFastGradientClipping
            from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping
            gsm = GradSampleModuleFastGradientClipping(model, max_grad_norm=1.0, use_ghost_clipping=True)
            opt = DPOptimizerFastGradientClipping(torch.optim.SGD(gsm.parameters(), lr=0.1), noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=B)
            crit = DPLossFastGradientClipping(gsm, opt, nn.CrossEntropyLoss(reduction="mean"), loss_reduction="mean")
            def step():
                opt.zero_grad(); loss = crit(gsm(x), y); loss.backward(); opt.step()
        else:
            opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=0.1), noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=B)
            def step():
                opt.zero_grad(); lossf(gsm(x), y).backward(); opt.step()
    for _ in range(warm): step()
    t = time.perf_counter()
    for _ in range(steps): step()
    dt = (time.perf_counter() - t) / steps
    params = sum(p.numel() for p in model.parameters())
    return dict(workload=name, mode=mode, threads=torch.get_num_threads(), batch=B, params=params,
                step_ms=round(dt * 1e3, 3), examples_per_s=round(B / dt, 1))

if __name__ == "__main__":
    torch.set_num_threads(int(sys.argv[1]))
    names = sys.argv[2:] or list(WORKLOADS)
    for n in names:
        for mode in os.environ.get("BENCH_MODES", "nonprivate,opacus_hooks,opacus_ghost").split(","):
            try:
                print(json.dumps(bench(n, mode)), flush=True)
            except Exception as e:
                print(json.dumps(dict(workload=n, mode=mode, error=str(e)[:200])), flush=True)
