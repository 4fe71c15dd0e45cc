import torch, time
torch.set_num_threads(1)
shapes=[(256,784,512),(256,512,512),(512,256,784),(512,256,512),(256,512,784)]
tot_flops=0; tot_t=0
for m,k,n in shapes:
    a=torch.randn(m,k); b=torch.randn(k,n)
    for _ in range(20): a@b
    t=time.perf_counter(); R=400
    for _ in range(R): a@b
    dt=(time.perf_counter()-t)/R
    print(f"{m}x{k}x{n}: {2*m*k*n/dt/1e9:.1f} GFLOP/s")
a=torch.randn(2048,2048); b=torch.randn(2048,2048)
a@b; t=time.perf_counter(); a@b; a@b; dt=(time.perf_counter()-t)/2
print("2048^3", 2*2048**3/dt/1e9)
print(torch.__config__.show().split('\n')[0:12])
