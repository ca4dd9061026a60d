import sys, torch
import sassas
from kernels_sass.winograd import gemmgen as G
dev = torch.device("cuda")
for opts in [G.GemmOptions(), G.GemmOptions(depbar_yield=False), G.GemmOptions(wait_all=True)]:
    bad_onehot = 0
    g = G.GemmShape(16, 128, 128)
    k = sassas.load(G.build(g, opts, cache=False))[G.kernel_name(g, opts)]
    for rep in range(3):
        for c in range(16):
            u = torch.ones((g.rows, g.K), device=dev)
            v = torch.zeros((g.rows, g.T), device=dev)
            v.view(-1)[: 36 * g.C * g.T].view(36, g.C, g.T)[:, c, :] = 1.0
            m = torch.full((36, g.K, g.T), float("nan"), device=dev)
            k(g.grid(), 256, u.data_ptr(), v.data_ptr(), m.data_ptr(), shared=G.SMEM_BYTES)
            torch.cuda.synchronize()
            bad_onehot += int((m != 1.0).sum())
    print(opts.tag() or "default", "one-hot wrong outputs:", bad_onehot, flush=True)
    for g in [G.GemmShape(32, 128, 128), G.GemmShape(256, 256, 512), G.GemmShape(256, 256, 512, 2), G.GemmShape(512, 512, 512, 2), G.GemmShape(512, 512, 384, 1)]:
        k = sassas.load(G.build(g, opts, cache=False))[G.kernel_name(g, opts)]
        u = torch.randn((g.rows, g.K), device=dev); v = torch.randn((g.rows, g.T), device=dev)
        want = torch.bmm(u[:36 * g.C].view(36, g.C, g.K).double().transpose(1, 2), v[:36 * g.C].view(36, g.C, g.T).double())
        errs = []
        for rep in range(3):
            m = torch.full((g.parts * 36, g.K, g.T), float("nan"), device=dev)
            k(g.grid(), 256, u.data_ptr(), v.data_ptr(), m.data_ptr(), shared=G.SMEM_BYTES)
            torch.cuda.synchronize()
            got = m.view(g.parts, 36, g.K, g.T).double().sum(0)
            bad = (got - want).abs() > 1e-4 * want.abs().max()
            errs.append((float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want)), int(torch.isnan(got).sum()), int(bad.sum())))
        print(opts.tag() or "default", g, errs, flush=True)
