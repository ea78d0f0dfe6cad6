#!/bin/bash
# Connected side, after bench/h200_rehearse_wheelhouse.sh: lays out what the rehearsal's H200 proof
# (issue 25) carries to the GPU node, so that a session with device time runs it in one go
# (bench/RESULTS.md, "What the remaining GPU proof needs"):
#
#   .rh/pf/   preflight.pyz (tools/build_pyz.py, this checkout), h200_rehearse.sh,
#             rehearse_fixtures.py, wheelhouse.parts.json, and the launches:
#             launch-example.txt  verl's examples/grpo_trainer/run_qwen2_5-3b_gsm8k_grpo_lora.sh at the
#                                 verl tag VERL_TAG (default v0.7.0: the newest in the mirror read; the
#                                 file is unchanged on main), its python command without "$@"
#             launch.txt          the same with the two findings of the first H200 run applied (SDPA:
#                                 no flash-attn wheel for torch 2.11/cu130; lora_rank=0: the layered
#                                 LoRA sync refuses FSDP NO_SHARD on one GPU); the pass and every plant
#                                 start from it
#   .rh/wN/   the wheelhouse's part N (one per device call: a call carries at most 64 MiB)
#
# usage: bash bench/h200_rehearse_prepare.sh [PARTS_DIR]   (default .wh/rehearse)
# .rh/ must be ignored by git (.gitignore has it): the run tool carries ignored paths only when named.
set -eu
cd "$(dirname "$0")/.."
PARTS=${1:-.wh/rehearse}
PY=${PYTHON:-python3}
VERL_GIT=${VERL_GIT:-/work/.mirror/volcengine+verl/repo}
VERL_TAG=${VERL_TAG:-v0.7.0}
EXAMPLE=examples/grpo_trainer/run_qwen2_5-3b_gsm8k_grpo_lora.sh
git check-ignore -q .rh/pf/preflight.pyz || { echo ".rh/ is not ignored by git: add /.rh/ to .gitignore" >&2; exit 2; }
[ -f "$PARTS/wheelhouse.parts.json" ] || { echo "no $PARTS/wheelhouse.parts.json: run bench/h200_rehearse_wheelhouse.sh" >&2; exit 2; }
rm -rf .rh
mkdir -p .rh/pf
"$PY" tools/build_pyz.py -o .rh/pf/preflight.pyz
cp bench/h200_rehearse.sh bench/rehearse_fixtures.py "$PARTS/wheelhouse.parts.json" .rh/pf/
# the python command of the example, as bash reads it: from "python3 -m" to the line ending in "$@"
git --git-dir="$VERL_GIT" show "$VERL_TAG:$EXAMPLE" |
    sed -n '/^python3 -m verl.trainer.main_ppo/,/\$@/p' | sed 's# *\$@$##' >.rh/pf/launch-example.txt
grep -q "lora_rank=64" .rh/pf/launch-example.txt || { echo "$VERL_TAG:$EXAMPLE changed: check the seds" >&2; exit 2; }
sed -e 's#actor_rollout_ref.model.lora_rank=64#actor_rollout_ref.model.lora_rank=0#' \
    -e 's#^\( *\)actor_rollout_ref.model.lora_alpha=32 \\$#&\n\1+actor_rollout_ref.model.override_config.attn_implementation=sdpa \\#' \
    .rh/pf/launch-example.txt >.rh/pf/launch.txt
n=0
for f in "$PARTS"/wheelhouse.tar.part-*; do
    n=$((n + 1))
    mkdir -p ".rh/w$n"
    cp "$f" ".rh/w$n/"
done
du -sh .rh/pf .rh/w* | tr '\n' ' '; echo
echo "$n parts; device calls (run tool, kind nvidia-h200), in order:"
for i in $(seq 1 "$n"); do
    echo "  carry [\".rh/pf\", \".rh/w$i\"]  command: bash .rh/pf/h200_rehearse.sh part .rh/w$i"
done
echo "  then the calls of bench/RESULTS.md (carry [\".rh/pf\"] each)"
