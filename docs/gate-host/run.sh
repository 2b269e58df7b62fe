#!/usr/bin/env bash
# The gate-host example: build the bundled example's oracle on a GPU host and run the
# golden gate there (`upstream-sync golden --strict`, what `nox -s golden -- --strict` runs).
# The host has no network: the package's own dependencies and setuptools (for the
# oracle's isolated build) come from a local wheel folder (.whl), and the CUDA torch from
# the host image (image_site_dirs).
set -euo pipefail
export PYTHONUNBUFFERED=1
root=$(pwd)
python3 -m pip install -q --no-index --no-deps --target /tmp/site "$root"/.whl/{gitpython,gitdb,smmap,tomli_w}-*.whl
export PYTHONPATH=/tmp/site:$root
work=$(mktemp -d)/gate
python3 -c "import sys; from pathlib import Path; from sync import example; example.build(Path(sys.argv[1]), Path('examples'))" "$work"
port=$work/port
mkdir -p "$port/tools/gate"
cp "$root/docs/gate-host/dump_cuda_rmsnorm.py" "$port/tools/gate/"
site=$(python3 -c 'import torch, pathlib; print(pathlib.Path(torch.__file__).parents[1])')
cat > "$port/.agents/upstream-sync.toml" <<TOML
schema = 1

[surface]
port_roots = ["src", "tools"]

[oracles.vllm]
build_mode = "precompiled"
build_env = { VLLM_USE_PRECOMPILED = "1" }
require_flashinfer = false
require_torch = true
image_site_dirs = ["$site"]

[golden]
dir = "goldens"
needs_gpu = true
scripts = [["{python}", "tools/gate/dump_cuda_rmsnorm.py", "--out", "{out}"]]
TOML
export SYNC_PORT=$port SYNC_GATE_HOSTS=$(hostname)
export UV_OFFLINE=1 UV_FIND_LINKS=$root/.whl PIP_NO_INDEX=1 PIP_FIND_LINKS=$root/.whl
echo "\$ upstream-sync oracle build --oracle vllm"
python3 -m sync oracle build --oracle vllm
echo "\$ upstream-sync oracle verify --oracle vllm"
python3 -m sync oracle verify --oracle vllm
echo "\$ upstream-sync golden --strict"
python3 -m sync golden --strict
echo "\$ upstream-sync golden --strict --json   (the recorded gate)"
python3 -m sync golden --strict --json
if [ -n "${OUT:-}" ]; then
  cp "$port/goldens/cuda_rmsnorm/manifest.json" "$OUT/manifest.json"
  cp "$port/goldens/cuda_rmsnorm/output.json" "$OUT/output.json"
  cp "$port"/.agents/sync/gates/*.json "$OUT/gates.json"
fi
