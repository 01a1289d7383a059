"""A small deterministic training loop, shared by the GPU test (in-process, on umem) and its
reference run (this file as a script, PyTorch's default allocator): prints the losses as JSON."""
import json

import torch


def train(steps=30):
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda", 0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(512, 64, generator=gen).to(dev)
    y = torch.randint(0, 10, (512,), generator=gen).to(dev)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    print(json.dumps(train()))
