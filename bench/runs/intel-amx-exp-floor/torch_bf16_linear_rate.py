# torch 2.15 bf16 linear (oneDNN AMX brgemm) at the forward projections shapes, 2 threads: TSC cycles per 16x16x32 tile product over both cores (TSC 2.6 GHz).
import torch, time
torch.set_num_threads(2)
for (m,k,n) in [(512,768,768),(512,768,2304),(4096,768,768)]:
    a=torch.randn(m,k).bfloat16(); w=torch.randn(n,k).bfloat16()
    for _ in range(20): torch.nn.functional.linear(a,w)
    ts=[]
    for r in range(7):
        t=time.perf_counter()
        for _ in range(50): torch.nn.functional.linear(a,w)
        ts.append((time.perf_counter()-t)/50)
    t=sorted(ts)[3]
    print(m,k,n, f"{t*1e6:.0f} us  {2*m*k*n/t/1e12:.2f} TFLOP/s  cycles/product(2 cores) {t*2.6e9*2/(m*k*n/8192):.1f}")
