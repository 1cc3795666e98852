import torch
s = torch.randn(8192, 1024, device='cuda')
work = lambda: torch.softmax(s, dim=-1)
work()
work()
torch.cuda.synchronize()
