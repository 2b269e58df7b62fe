#!/usr/bin/env python3
"""Original: no upstream mirror. A golden dump that runs a real op on the gate host's GPU.

Run by `upstream-sync golden` with the oracle's interpreter (`{python} ... --out {out}`):
RMSNorm of a fixed, seeded activation in float32 on CUDA, the oracle's vLLM
identity alongside, and the device name in `golden-extra.json` (which goes into
the case's manifest, not into the golden bytes).
"""

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch
    import vllm  # the oracle's, never the port's

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible: this dump runs on a GPU gate host only")
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(4, 64, generator=gen, dtype=torch.float32).cuda()
    weight = torch.linspace(0.5, 1.5, 64, dtype=torch.float32).cuda()
    eps = 1e-6
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
    torch.cuda.synchronize()
    case = Path(args.out) / "cuda_rmsnorm"
    case.mkdir(parents=True, exist_ok=True)
    (case / "output.json").write_text(json.dumps({
        "op": "rms_norm", "shape": list(y.shape), "eps": eps,
        "checksum": round(float(y.double().sum()), 6),
        "first_row": [round(v, 6) for v in y[0, :8].tolist()],
        "oracle_vllm": vllm.__version__,
    }, indent=2) + "\n")
    (case / "golden-extra.json").write_text(json.dumps({
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
