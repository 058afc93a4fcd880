#!/usr/bin/env bash
# The appearance recipe on a lent accelerator, as one prepared command (docs/appearance.md, "On a
# lent GPU"). It trains `minterpr train --config reid` on a pack written by device_pack_reid.py
# (train.jsonl, val.jsonl, and weights.pth when it carries the starting weights), from the
# repository's own source (no install: the device's python3 holds torch, numpy, Pillow, PyYAML and
# tqdm, all the recipe imports), and
# leaves in OUT_DIR what a session needs to evaluate and publish it here: run/best.pt (+ its
# same-person calibration), run/metrics.jsonl, run/config.yaml, run/last.pt and train.log. A run
# is sized for one call (its manifests are unpacked into scratch space that goes with the call).
#
#   bash benchmarks/device_reid.sh PACK_DIR OUT_DIR [--set KEY=VALUE ...]
#   DEVICE=cpu bash benchmarks/device_reid.sh device_pack/reid /tmp/r --set epochs=1   # a dry run here
#
# The defaults are the shipped model's recipe (version 3: lr 7e-4, EPOCHS=60 passes of 100 PK
# batches of 64: 6,000 steps, two hours on 2 CPU cores); later --set arguments override them. A
# call stopped at its time limit still returns best.pt, the best epoch so far on val.
set -euo pipefail
pack=${1:?usage: device_reid.sh PACK_DIR OUT_DIR [--set KEY=VALUE ...]}
out=${2:?usage: device_reid.sh PACK_DIR OUT_DIR [--set KEY=VALUE ...]}
shift 2
for file in train.jsonl val.jsonl pack.json images.zip; do
    [ -f "$pack/$file" ] || { echo "device_reid: $pack/$file is missing: write the pack with device_pack_reid.py" >&2; exit 2; }
done
mkdir -p "$out"
# the crops travel as one zip (device_pack_reid.py): unpacked into scratch space beside the
# manifests, never into the pack (a carried folder must stay the size it was)
data=$(mktemp -d "${TMPDIR:-/tmp}/device_reid.XXXXXX")
trap 'rm -rf "$data"' EXIT
cp "$pack/train.jsonl" "$pack/val.jsonl" "$data/"
python3 -m zipfile -e "$pack/images.zip" "$data"
start_from=()  # the pack's starting weights when it carries them, else a random start
if [ -f "$pack/weights.pth" ]; then start_from=(--set "weights=$pack/weights.pth"); fi
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$here/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
cp "$pack/pack.json" "$out/pack.json"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' | tee "$out/train.log"
start=$(date +%s)
python3 -m minterpr train --config reid --out "$out/run" -q --device "${DEVICE:-cuda}" \
    --set "train=[$data/train.jsonl]" --set "val=$data/val.jsonl" ${start_from[@]+"${start_from[@]}"} \
    --set "epochs=${EPOCHS:-60}" --set iterations_per_epoch=100 --set lr=7.0e-4 "$@" 2>&1 | tee -a "$out/train.log"
echo "device_reid: $(( $(date +%s) - start )) s of training on ${DEVICE:-cuda}" | tee -a "$out/train.log"
