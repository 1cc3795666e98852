import torch
a, b, c = torch.randn(3, 33554432, device='cuda')
torch.addcmul(a, b, c)
torch.cuda.synchronize()
