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

# 2. The student: the teacher's layers 0, 2 and 5, then stages from its own weights: a quarter of
#    the batches technical instead of half; the distillation's KL and f terms weighed twice against
#    the labels' cross-entropy (the bar is the teacher, not the labels); then the cross-entropy and
#    KL on the hybrid score, with f compared at each candidate's top 128 tokens under the teacher
#    (the expansion terms BM25 cannot supply).
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
stage student3f --init "$C/student3d/final.npz" --tech-share 0.4 --steps 400 --lr 3e-5 --warmup 20 --seed 51 \
  --distill-weight 2 --f-weight 2 --column-sample 512 --f-teacher-top 128 --hybrid
S=student3f

# 3. The export, as it would ship: int8 kernels, 128 tokens, a rank-64 candidate projection scoring
#    1,024 candidates exactly, its bases fitted to the student's hidden states on training text
#    (wikiqa-train and every 60th technical training package; the printed overlaps compare them with
#    E's own subspace on autoconf's passages). The rank-96 export only carries the weights to the fit.
OUT=$C/lr46/c46f-f64c1024
FIT=$C/lr46/$(basename "$OUT")-float
[ -e "$FIT/sparc.json" ] || python -m sparc_local.model.export "$C/$S/final.npz" "$FIT" --name sparc-minilm-l3 \
  --tokenizer "$T/tokenizer.json" --top-k 128 --max-length 128 --quant int8 --rank 96 --candidates 1024
CAL=(../shared/data/reqa/wikiqa-train)
for p in $(python3 -c "import json; print(' '.join(json.load(open('$C/tech-v3/split.json'))['train'][::60]))"); do
  CAL+=("$C/tech-v3/pkgs/$p")
done
[ -e "$OUT.basis.npz" ] || python -m sparc_lab.rank_estimate "$FIT" --data "$C/tech-v3/pkgs/autoconf" --first 200 \
  --passages 60 --ranks 64 96 --calibrate 40 --calibrate-on "${CAL[@]}" --save "$OUT.basis.npz"
[ -e "$OUT/sparc.json" ] || python -m sparc_local.model.export "$C/$S/final.npz" "$OUT" \
  --name sparc-minilm-l3 --tokenizer "$T/tokenizer.json" --top-k 128 --max-length 128 --quant int8 \
  --rank 64 --candidates 1024 --basis "$OUT.basis.npz"

L=$C/lr46/$(basename "$OUT")  # the logs of this export's checks

# 4. Paired against the teacher, reranked, one answer per passage. The FAQ set (the natural test
#    questions, benchmarks/faq_set.py) first: it is where the students fall short, and the cheapest.
[ -e "$B/faq" ] || python benchmarks/faq_set.py --out "$B/faq"
for set in "$B/faq" ../shared/data/reqa/newsqa-dev ../shared/data/reqa/squad-dev; do
  log=$L-$(basename "$set").log
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
  for arm in teacher:$T "$(basename "$OUT"):$OUT"; do  # an arm is named by its export, so a new one runs
    tag=${arm%%:*} model=${arm#*:}
    if [ ! -e "$E/$tag-$desk-R" ]; then
      python benchmarks/desk.py --desk "$desk" --model "$model" --home "$E/home-$tag-$desk" --fast --recall 50 \
        --ranks "$E/$tag-$desk-F" > "$E/$tag-$desk-F.log" 2>&1
      python benchmarks/desk.py --desk "$desk" --model "$model" --home "$E/home-$tag-$desk" --reuse \
        --ranks "$E/$tag-$desk-R" --against "$E/$tag-$desk-F" > "$E/$tag-$desk-R.log" 2>&1
    fi
  done
  tag=$(basename "$OUT")
  python benchmarks/desk.py --compare "$E/teacher-$desk-F" "$E/$tag-$desk-F" --recall 50 > "$E/compare-$tag-$desk-F.log"
  python benchmarks/desk.py --compare "$E/teacher-$desk-R" "$E/$tag-$desk-R" > "$E/compare-$tag-$desk-R.log"
done

# 6. What `adapt` needs in the folder: the MLM head it trains E through, on the student's own encoder
#    (the card's recipe), and its gate's token counts of the training text (the teacher's, byte for byte).
[ -e "$OUT/reference_counts.npz" ] || python -m sparc_lab.reference "$OUT" > "$L-reference.log" 2>&1
[ -e "$OUT/mlm_head.npz" ] || python -m sparc_lab.mlm_head --encoder "$OUT" --model "$OUT" --steps 300 \
  > "$L-mlm_head.log" 2>&1

# 7. The golden checks by what a user sees: native and emulated AVX2, and eval's MRR@10 against
#    float compute (issue 46's decisions).
[ -e "$L-golden.log" ] || { python benchmarks/golden_drift.py "$OUT" --eval ../shared/data/reqa/squad-dev \
  > "$L-golden.log.part" 2>&1; mv "$L-golden.log.part" "$L-golden.log"; }

# 8. adapt on the student: its cost against the budget (10 min, 1 GB) and its effect on the FAQ set,
#    the card's two commands with the student as the base.
[ -e "$L-adapt-cost.log" ] || { python benchmarks/adapt_e2e.py --model "$OUT" --home "$B/adapt46-cost" \
  --data ../shared/data/reqa/wikiqa-train --first 8000 --force > "$L-adapt-cost.log.part" 2>&1
  mv "$L-adapt-cost.log.part" "$L-adapt-cost.log"; }
[ -e "$L-adapt-faq.log" ] || { python benchmarks/adapt_e2e.py --model "$OUT" --home "$B/adapt46-faq" \
  --data "$B/faq" --no-switch --eval --paired --force > "$L-adapt-faq.log.part" 2>&1
  mv "$L-adapt-faq.log.part" "$L-adapt-faq.log"; }

# 9. Speed with the trained weights, paired in one run: 6eb2a8d, the teacher's last commit (e080205)
#    and that commit with the student in the shipped model's folder (worktrees outside git's tree,
#    never committed from).
W=$C/wt46
if [ ! -e "$L-speed-desk.log" ]; then
  [ -e "$W/base" ] || git worktree add --detach "$W/base" 6eb2a8d
  [ -e "$W/main" ] || git worktree add --detach "$W/main" e080205
  [ -e "$W/$(basename "$OUT")" ] || { git worktree add --detach "$W/$(basename "$OUT")" e080205
    rm -r "${W:?}/$(basename "$OUT")/$M"; cp -r "$OUT" "$W/$(basename "$OUT")/$M"; }
  python benchmarks/index_speed.py --trees "$W/base" "$W/main" "$W/$(basename "$OUT")" --docs "$B/desk" --rounds 3 \
    > "$L-speed-desk.log.part" 2>&1 && mv "$L-speed-desk.log.part" "$L-speed-desk.log"
fi
[ -e "$L-speed-squad.log" ] || { python benchmarks/index_speed.py --trees "$W/base" "$W/main" "$W/$(basename "$OUT")" \
  --rounds 3 > "$L-speed-squad.log.part" 2>&1; mv "$L-speed-squad.log.part" "$L-speed-squad.log"; }
