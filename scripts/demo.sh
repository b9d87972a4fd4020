#!/usr/bin/env bash
# Install everything and run the demo: a server with 4 declared A100s, a few jobs,
# the queue while they run, then the finished jobs and their logs, and two tracked training runs compared.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export PATH="$PWD/.venv/bin:$PATH"
export CORRAL_HOME="${CORRAL_HOME:-$(mktemp -d /tmp/corral-demo.XXXXXX)}"
trap 'corral down >/dev/null 2>&1 || true' EXIT

step() { local line; printf -v line '%q ' "$@"; printf '\n\033[1m$ %s\033[0m\n' "$line"; "$@"; }

step corral up --detach --port 0 --gpus 4 --gpu-type A100 --gpu-mem 80G
cd examples
step corral submit hello_gpu.sh
step corral submit --gpus 2 --time 2:00 -J train-toy -- python3 train_toy.py --steps 30
step corral submit --gres=gpu:A100:3 -J big-model --wrap 'echo "3 GPUs: $CUDA_VISIBLE_DEVICES"; sleep 2'
step corral submit --gpus 1 --mem 64M -J leaky -- python3 -c 'x = bytearray(256 * 2**20); import time; time.sleep(5)'
step corral submit --gpus 1 -J broken -- sh -c 'echo "about to fail" >&2; exit 3'
step corral submit --gpus 1 -t 10 -J mnist-fast -- python3 mnist_cnn.py --epochs 3 --lr 1e-2
step corral submit --gpus 1 -t 10 -J mnist-slow -- python3 mnist_cnn.py --epochs 3 --lr 1e-3
sweep=$(corral submit --parsable --array=0-3%2 --gpus 1 -t 1 -J sweep --wrap 'echo "task $SLURM_ARRAY_TASK_ID on GPU $CUDA_VISIBLE_DEVICES"; sleep 1')
echo "Submitted array job $sweep (4 tasks, at most 2 at once)"
step corral submit -d "afterok:$sweep" -t 1 -J summarize --wrap 'echo "every sweep task succeeded"'
sleep 1
step corral queue
step corral queue --start
step corral nodes
for id in $(corral queue --json | python3 -c 'import json,sys; print(" ".join(str(j["id"]) for j in json.load(sys.stdin)))'); do
  corral wait "$id" >/dev/null 2>&1 || true
done
step corral history
# each job by the name history gave it (an array's task as 8_0, as every view names it), in the order they started
for ref in $(corral history --json | python3 -c 'import json,sys; print(" ".join(j["ref"] for j in reversed(json.load(sys.stdin))))'); do
  printf '\n\033[1m--- job %s: stdout ---\033[0m\n' "$ref"; corral logs --tail 5 "$ref"
  printf '\033[1m--- job %s: stderr ---\033[0m\n' "$ref"; corral logs --stderr --tail 5 "$ref"
done
step corral runs
runs=$(corral runs --json | python3 -c 'import json,sys; print(" ".join(str(r["id"]) for r in json.load(sys.stdin)))')
step corral compare $runs
step corral metrics "${runs##* }" val/loss
step corral eff "$(corral history --json | python3 -c 'import json,sys; print(next(j["ref"] for j in json.load(sys.stdin) if j["name"] == "mnist-fast"))')"
step corral diagnose "$(corral history --json | python3 -c 'import json,sys; print(next(j["ref"] for j in json.load(sys.stdin) if j["name"] == "leaky"))')"
url=$(python3 -c 'import json,os,sys; print(json.load(open(os.path.join(sys.argv[1], "server.json")))["url"])' "$CORRAL_HOME")
if [ -n "${CORRAL_DEMO_KEEP:-}" ]; then
  echo "The dashboard is at $url/ ; stop the server with: CORRAL_HOME=$CORRAL_HOME corral down"
  trap - EXIT
  exit 0
fi
echo "(CORRAL_DEMO_KEEP=1 ./scripts/demo.sh leaves the server up to look at the dashboard at $url/)"
step corral down
