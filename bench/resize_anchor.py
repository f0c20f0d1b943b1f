# The CUDA anchor for `gpukit bench resize` (bench/RESIZE_DEVICE.sh runs it): torch's
# antialiased resize on the GPU, the one torchvision's Resize(antialias=True) runs on a
# CUDA tensor, 4K RGB to 1080p, bicubic and bilinear, float32 and uint8 (uint8 where the
# torch build takes it on CUDA; 2.11 does not). CUDA events, median of 30 after 5 warm-ups.
# Torch has no lanczos; its bicubic (a = -0.75) is not Pillow's (a = -0.5) and sums in
# float: an anchor for the time, not the bytes. Run on the GPU machine: python3 bench/resize_anchor.py
import torch, statistics
F = torch.nn.functional
dev = "cuda"
def bench(fn, reps=30):
    for _ in range(5): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    return statistics.median(ts)
x8 = torch.randint(0, 256, (1, 3, 2160, 3840), dtype=torch.uint8, device=dev)
xf = x8.float()
for mode in ["bicubic", "bilinear"]:
    t = bench(lambda: F.interpolate(xf, size=(1080, 1920), mode=mode, antialias=True))
    print(f"torch interpolate f32 4K->1080p {mode} antialias {t:.4f} ms {1920*1080/t/1e6:.2f} Gpix/s")
    try:
        t = bench(lambda: F.interpolate(x8, size=(1080, 1920), mode=mode, antialias=True))
        print(f"torch interpolate u8 4K->1080p {mode} antialias {t:.4f} ms {1920*1080/t/1e6:.2f} Gpix/s")
    except Exception as ex:
        print(f"torch interpolate u8 {mode}: {type(ex).__name__}: {str(ex)[:100]}")
