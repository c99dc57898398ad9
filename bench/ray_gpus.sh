#!/bin/bash
# Run on a machine with several GPUs, Parity and parity-ray installed (OUT: a folder for the results). Not part of CI.
# issue 18 on a multi-GPU machine: GPUs per check, speed-up, and reduce equality (ray vs local)
set -o pipefail
R=$PWD
nvidia-smi --query-gpu=index,uuid,name --format=csv | tee $OUT/gpus.csv
N=$(nvidia-smi -L | wc -l)
mkdir -p /tmp/w && cd /tmp/w && cp $R/bench/ray_gpu_check.py gpu_check.py && rm -f seen.jsonl
/usr/bin/time -f "ray jobs=$N wall %e s" python3 -m parity debug repeat --until 16 --executor ray --gpus-per-check 1 --jobs $N --check python3 gpu_check.py 2>&1 | tail -3 | tee $OUT/ray_repeat.txt
cp seen.jsonl $OUT/seen_ray.jsonl; rm -f seen.jsonl
/usr/bin/time -f "local jobs=1 wall %e s" python3 -m parity debug repeat --until 16 --jobs 1 --check python3 gpu_check.py 2>&1 | tail -2 | tee $OUT/local_repeat.txt
# reduce: PP-OCRv4 det in fp16, fed inputs up to 60000, fails --validate (Inf); same search with ray and local
mkdir -p /tmp/r && cd /tmp/r && cp "${DET:?set DET to PP-OCRv4 det (tests/corpus: ppocr_det)}" det.onnx
python3 -m parity convert --fp-to-fp16 det.onnx -o det16.onnx -q
python3 -m parity run det.onnx --onnxrt --input-shapes x:[1,3,64,64] --val-range x:[0,60000] --save-inputs in.npz -q
for ex in local ray; do
  opts=$([ $ex = ray ] && echo "--executor ray --jobs $N" || echo "--jobs $N")
  /usr/bin/time -f "$ex reduce wall %e s" python3 -m parity debug reduce det16.onnx -o min_$ex.onnx --no-repro --mode dichotomic --load-inputs in.npz --report $OUT/reduce_$ex.json $opts \
    --check python3 -m parity run parity_debug.onnx --onnxrt --load-inputs parity_debug_inputs.npz --onnx-outputs mark all --validate 2>&1 | tail -3 | tee $OUT/reduce_$ex.txt
done
python3 - <<'PY' | tee $OUT/equal.txt
import json, os
out = os.environ["OUT"]
a, b = (json.load(open(f"{out}/reduce_{x}.json")) for x in ("local", "ray"))
print("local result nodes:", a["result"].get("nodes"), "| ray:", b["result"].get("nodes"))
print("equal nodes:", a["result"].get("nodes") == b["result"].get("nodes"))
print("equal verdicts:", sorted((c["key"], c["verdict"]) for c in a["checks"]) == sorted((c["key"], c["verdict"]) for c in b["checks"]))
PY
