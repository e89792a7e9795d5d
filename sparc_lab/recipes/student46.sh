#!/usr/bin/env bash
# Issue 46's 3-layer student at 128 tokens, from nothing: the technical build, the three training
# stages, the export, the paired comparisons against the shipped encoder (reranked), its MLM head,
# the golden checks, adapt's cost and effect, and the speed paired against 6eb2a8d and main.
#
#   bash sparc_lab/recipes/student46.sh            # from the repository's root, in the lab's venv
#
# Resumable: a stage whose output exists is skipped, and the training stages resume from their last
# checkpoint. Everything it writes lives under ~/.cache/sparc-local-train and ~/.cache/sparc-local-bench.
set -euo pipefail
C=~/.cache/sparc-local-train
B=~/.cache/sparc-local-bench
mkdir -p "$C/lr46" "$B"
# The teacher: the shipped encoder's folder M as of e080205, taken from git so that the recipe runs
# whatever folder ships later.
M=exported_models/sparc-minilm-l6
T=$C/teacher-l6
[ -e "$T/sparc.json" ] || { mkdir -p "$T"; git archive e080205 "$M" | tar -x --strip-components=2 -C "$T"; }

# 1. The technical build: Debian's documentation packages 0-1,944 and the man pages of 300 program
#    packages (sparc_lab/techdata.py; the kept-out packages and the test sets are never read).
[ -e "$C/tech-v2/split.json" ] || python -m sparc_lab.techdata --out "$C/tech-v2" --max-doc 1000 --max-man 300
[ -e "$C/tech-v3new/split.json" ] || python -m sparc_lab.techdata --out "$C/tech-v3new" --max-doc 1945 --max-man 0 --doc-from 1000
[ -e "$C/tech-v3/split.json" ] || python -m sparc_lab.techdata --out "$C/tech-v3" --join "$C/tech-v2" "$C/tech-v3new"

# 2. The student: the teacher's layers 0, 2 and 5, then three stages from its own weights: a
#    quarter of the batches technical instead of half, then the distillation's KL and f terms
#    weighed twice against the labels' cross-entropy (the bar is the teacher, not the labels).
DATA=(--teacher "$T" --tech "$C/tech-v3" --tech-rewrite 0.5 --tech-natural-first --batch 16 --topk 128
      --topk-temp 0.2 --threads 2 --valid-every 200 --ckpt-every 20)
stage() {  # RUN, then the stage's own flags
  local run=$1; shift
  [ -e "$C/$run/final.npz" ] || python -m sparc_lab.student "${DATA[@]}" --run "$C/$run" "$@"
}
stage student3 --keep 0,2,5 --tech-share 0.5 --steps 900 --lr 1e-4 --warmup 50 --seed 46
stage student3b --init "$C/student3/final.npz" --tech-share 0.5 --steps 600 --lr 5e-5 --warmup 30 --seed 47
stage student3c --init "$C/student3b/final.npz" --tech-share 0.25 --steps 400 --lr 5e-5 --warmup 30 --seed 48
stage student3d --init "$C/student3c/final.npz" --tech-share 0.4 --steps 600 --lr 5e-5 --warmup 30 --seed 49 \
  --distill-weight 2 --f-weight 2

# 3. The export, as it would ship: int8 kernels, a rank-96 candidate projection scoring 1,024 candidates
#    exactly, 128 tokens.
OUT=$C/lr46/c46d-r96c1024
[ -e "$OUT/sparc.json" ] || python -m sparc_local.model.export "$C/student3d/final.npz" "$OUT" \
  --name sparc-minilm-l3 --tokenizer "$T/tokenizer.json" --top-k 128 --max-length 128 --quant int8 \
  --rank 96 --candidates 1024

# 4. Paired against the teacher, reranked, one answer per passage. The FAQ set (the natural test
#    questions, benchmarks/faq_set.py) first: it is where the students fall short, and the cheapest.
[ -e "$B/faq" ] || python benchmarks/faq_set.py --out "$B/faq"
for set in "$B/faq" ../shared/data/reqa/newsqa-dev ../shared/data/reqa/squad-dev; do
  log=$C/lr46/$(basename "$OUT")-$(basename "$set").log
  if [ ! -e "$log" ]; then
    SPARC_LOCAL_HOME=$B/compare python benchmarks/model_compare.py --base "$T" --new "$OUT" \
      --data "$set" --rerank 0 > "$log.part" 2>&1
    mv "$log.part" "$log"
  fi
done

# 5. The two desks, end to end: index with each model, then the first stage alone (recall@50) and
#    the default reranked answers; the candidate paired against the teacher question by question.
E=$C/e2e46
mkdir -p "$E"
for desk in desk desk-science; do
  for arm in teacher:$T candidate:$OUT; do
    tag=${arm%%:*} model=${arm#*:}
    if [ ! -e "$E/$tag-$desk-R" ]; then
      python benchmarks/desk.py --desk "$desk" --model "$model" --home "$E/home-$tag-$desk" --fast --recall 50 \
        --ranks "$E/$tag-$desk-F" > "$E/$tag-$desk-F.log" 2>&1
      python benchmarks/desk.py --desk "$desk" --model "$model" --home "$E/home-$tag-$desk" --reuse \
        --ranks "$E/$tag-$desk-R" --against "$E/$tag-$desk-F" > "$E/$tag-$desk-R.log" 2>&1
    fi
  done
  python benchmarks/desk.py --compare "$E/teacher-$desk-F" "$E/candidate-$desk-F" --recall 50 > "$E/compare-$desk-F.log"
  python benchmarks/desk.py --compare "$E/teacher-$desk-R" "$E/candidate-$desk-R" > "$E/compare-$desk-R.log"
done

# 6. What `adapt` needs in the folder: the MLM head it trains E through, on the student's own encoder
#    (the card's recipe), and its gate's token counts of the training text (the teacher's, byte for byte).
[ -e "$OUT/reference_counts.npz" ] || python -m sparc_lab.reference "$OUT" > "$C/lr46/reference.log" 2>&1
[ -e "$OUT/mlm_head.npz" ] || python -m sparc_lab.mlm_head --encoder "$OUT" --model "$OUT" --steps 300 \
  > "$C/lr46/mlm_head.log" 2>&1

# 7. The golden checks by what a user sees: native and emulated AVX2, and eval's MRR@10 against
#    float compute (issue 46's decisions).
[ -e "$C/lr46/golden.log" ] || { python benchmarks/golden_drift.py "$OUT" --eval ../shared/data/reqa/squad-dev \
  > "$C/lr46/golden.log.part" 2>&1; mv "$C/lr46/golden.log.part" "$C/lr46/golden.log"; }

# 8. adapt on the student: its cost against the budget (10 min, 1 GB) and its effect on the FAQ set,
#    the card's two commands with the student as the base.
[ -e "$C/lr46/adapt-cost.log" ] || { python benchmarks/adapt_e2e.py --model "$OUT" --home "$B/adapt46-cost" \
  --data ../shared/data/reqa/wikiqa-train --first 8000 --force > "$C/lr46/adapt-cost.log.part" 2>&1
  mv "$C/lr46/adapt-cost.log.part" "$C/lr46/adapt-cost.log"; }
[ -e "$C/lr46/adapt-faq.log" ] || { python benchmarks/adapt_e2e.py --model "$OUT" --home "$B/adapt46-faq" \
  --data "$B/faq" --no-switch --eval --paired --force > "$C/lr46/adapt-faq.log.part" 2>&1
  mv "$C/lr46/adapt-faq.log.part" "$C/lr46/adapt-faq.log"; }

# 9. Speed with the trained weights, paired in one run: 6eb2a8d, the teacher's last commit (e080205)
#    and that commit with the student in the shipped model's folder (worktrees outside git's tree,
#    never committed from).
W=$C/wt46
if [ ! -e "$C/lr46/speed-desk.log" ]; then
  [ -e "$W/base" ] || git worktree add --detach "$W/base" 6eb2a8d
  [ -e "$W/main" ] || git worktree add --detach "$W/main" e080205
  [ -e "$W/cand" ] || { git worktree add --detach "$W/cand" e080205; rm -r "${W:?}/cand/$M"; cp -r "$OUT" "$W/cand/$M"; }
  python benchmarks/index_speed.py --trees "$W/base" "$W/main" "$W/cand" --docs "$B/desk" --rounds 3 \
    > "$C/lr46/speed-desk.log.part" 2>&1 && mv "$C/lr46/speed-desk.log.part" "$C/lr46/speed-desk.log"
fi
[ -e "$C/lr46/speed-squad.log" ] || { python benchmarks/index_speed.py --trees "$W/base" "$W/main" "$W/cand" \
  --rounds 3 > "$C/lr46/speed-squad.log.part" 2>&1; mv "$C/lr46/speed-squad.log.part" "$C/lr46/speed-squad.log"; }
