"""A debug check doing real GPU work for a fixed time: torch matmuls on the GPU this check sees; records which."""
import json
import os
import time

import torch

start = time.time()
device = torch.device("cuda:0")
a = torch.randn(4096, 4096, device=device)
while time.time() - start < 2.0:
    a = torch.tanh(a @ a / 4096)
torch.cuda.synchronize()
with open("seen.jsonl", "a") as f:
    f.write(json.dumps({"i": int(os.environ["PARITY_DEBUG_ITERATION"]), "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
                        "uuid": str(torch.cuda.get_device_properties(0).uuid), "devices_seen": torch.cuda.device_count(),
                        "start": start, "end": time.time()}) + "\n")
