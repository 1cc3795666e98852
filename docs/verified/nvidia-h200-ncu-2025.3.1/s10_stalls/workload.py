import torch
x = torch.randn(8192, 1024, device='cuda')
work = lambda: torch.softmax(x, dim=-1)
work()
work()
torch.cuda.synchronize()
