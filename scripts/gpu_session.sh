#!/usr/bin/env bash
# One device call: install from bundled wheels, record the machine, then the steps in
# PERFLAB_STEPS (default "tests selfcheck chapter"; also: peak report profile sanitize overhead book selfcheck_cfg sweep
# sweep_builtins sweep_grid sweep_user kernels ab wall context neighbour sideprobe coldprobe ringprobe histprobe expertsprobe optprobe kvprobe softcapprobe autotuneprobe tilesprobe flexprobe genprobe energyprobe exploits aa warmcache targets gdsprobe ray stops cutlass_stage cutlass). Everything
# lands in $OUT: logs, mlflow.db, and bundle.tgz (MLflow artifacts, tables, raw ncu CSV, report) —
# the device returns a limited number of files.
#   PERFLAB_TARGETS (default 7; e.g. 1,7), PERFLAB_PYTEST_ARGS (default: the whole suite), PERFLAB_PEAKS (below),
#   PERFLAB_SELFCHECK_CONFIGS (config files for selfcheck_cfg), PERFLAB_OVERHEAD_N (default 20)
#   PERFLAB_BOOK_CHAPTERS (book; default "13 14 15 16 17 18 19 20"), PERFLAB_BOOK_ARGS (book: more run flags),
#   PERFLAB_BOOK_SPLIT (book: "equal" shares of the time left, the default; "order": each chapter all that is left),
#   PERFLAB_BOOK_REFERENCE (book: MLflow stores of a reference run, compared pair by pair)
#   PERFLAB_SWEEP_ARGS (extra flags for the sweep steps, e.g. "--steps 20")
#   PERFLAB_SWEEP_WORKLOADS (sweep_builtins; default "cnn gpt"), PERFLAB_SWEEP_TRIALS (default 16 each)
#   PERFLAB_KERNEL_CASES (default all), PERFLAB_KERNEL_DTYPE (default bf16), PERFLAB_KERNEL_ARGS (e.g. "--max-shapes 6")
set -uo pipefail
# The device's copy of .git is not this checkout's history: state the commit you send, as a literal
# (PERFLAB_GIT_COMMIT=$(git rev-parse HEAD) evaluated here, not in the device command).
: "${PERFLAB_GIT_COMMIT:?set PERFLAB_GIT_COMMIT to the commit of the tree you send}"
OUT=${OUT:-/tmp/perflab-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{
  date -u; nvidia-smi; python3 --version
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
  echo "commit ${PERFLAB_GIT_COMMIT:-unknown}"
} > "$OUT/machine.txt" 2>&1
if [ -z "${PERFLAB_SKIP_INSTALL:-}" ]; then  # set it to dry-run the steps where perflab is installed already
  PERFLAB_WHEELS=${PERFLAB_WHEELS:-.whl} ./install.sh --test > "$OUT/install.log" 2>&1 || { tail -30 "$OUT/install.log"; exit 1; }
  tail -1 "$OUT/install.log"
elif ! python3 -c "import perflab, mlflow" 2> /dev/null; then  # a machine given back meanwhile comes back bare
  echo "PERFLAB_SKIP_INSTALL is set but perflab or MLflow is not installed here (a fresh machine?): the steps that"
  echo "need them will fail; run again without it, carrying .whl"
fi
# PERFLAB_PEAKS: a peaks.json recorded by `perflab peak` on this device model (e.g. one under docs/results/),
# put in the peak cache so the runs log their roofline bound without spending the call on `perflab peak`.
if [ -n "${PERFLAB_PEAKS:-}" ]; then
  mkdir -p "$HOME/.cache/perflab" && cp "$PERFLAB_PEAKS" "${PERFLAB_PEAK_CACHE:-$HOME/.cache/perflab/peaks.json}"
fi
# The device kills a command at its limit and then nothing comes back: stop starting steps, and cut the
# running one, PERFLAB_BUDGET_S (default 540) seconds after the start, so the bundle is always written.
budget=${PERFLAB_BUDGET_S:-540}
for step in ${PERFLAB_STEPS:-tests selfcheck chapter}; do
  left=$((budget - SECONDS))
  if [ "$left" -lt 20 ]; then echo "== $step skipped: ${SECONDS}s of the ${budget}s budget used"; continue; fi
  T="timeout $left"
  echo "== $step $(date -u +%T) (${left}s left)"
  case $step in
    tests)
      $T python3 -m pytest -q -p no:cacheprovider ${PERFLAB_PYTEST_ARGS:---full tests} > "$OUT/pytest.log" 2>&1
      echo "pytest exit $?"; tail -4 "$OUT/pytest.log" ;;
    selfcheck)
      PERFLAB_NCU_DUMP="$OUT/ncu" $T perflab selfcheck --out "$OUT" ${PERFLAB_SELFCHECK_ARGS:-} > "$OUT/selfcheck.log" 2>&1
      echo "selfcheck exit $?"; grep -v "━" "$OUT/selfcheck.log" | tail -40 ;;
    selfcheck_cfg)  # the timing defaults vs alternatives: one selfcheck per config file, cuda_event only
      for cfg in ${PERFLAB_SELFCHECK_CONFIGS:-}; do
        name=$(basename "$cfg" | sed 's/\.[a-z]*$//')
        wl=$(for w in ${PERFLAB_SELFCHECK_CFG_WORKLOADS:-scale_64mib matmul_bf16}; do printf -- '--workload %s ' "$w"; done)
        md=$(for m in ${PERFLAB_SELFCHECK_CFG_MODES:-cuda_event}; do printf -- '--mode %s ' "$m"; done)
        $T perflab selfcheck --no-ncu $wl $md --config "$cfg" --out "$OUT/selfcheck-$name" > "$OUT/selfcheck-$name.log" 2>&1
        echo "selfcheck $name exit $?"; grep "^| [a-z_0-9]* | cuda" "$OUT/selfcheck-$name/selfcheck.md"
      done ;;
    probe)  # NVML clocks/power/throttle reasons while an 8192³ bf16 matmul runs (scripts/timing/matmul_clocks.py)
      $T python3 scripts/timing/matmul_clocks.py --seconds 4 > "$OUT/matmul_clocks.md" 2>&1
      echo "probe exit $?"; tail -3 "$OUT/matmul_clocks.md" ;;
    chapter)  # one suite (parent run) per chapter, so a chapter that runs out of budget loses only itself
      for ch in $(echo "${PERFLAB_TARGETS:-7}" | tr ',' ' '); do
        left=$((budget - SECONDS))
        if [ "$left" -lt 30 ]; then echo "chapter $ch skipped: ${left}s left"; continue; fi
        timeout "$left" mlflow run . -e chapter -P ch="$ch" --env-manager local >> "$OUT/chapter.log" 2>&1
        echo "mlflow run ch$ch exit $?"; perflab show --tracking-uri sqlite:///mlflow.db | tee -a "$OUT/show.md" | grep -v "^$"
      done ;;
    gdsprobe)  # chapter 5's gds: could GPUDirect Storage run here? nvidia-fs, the filesystem under TMPDIR, libcufile
      { ls /proc/driver/nvidia-fs 2>&1; grep -c nvidia_fs /proc/modules; df -T "${TMPDIR:-/tmp}" | tail -1
        python3 -c "from cuda.bindings import cufile; print('libcufile', cufile.get_version())"; } > "$OUT/gds.txt" 2>&1
      echo "gdsprobe exit $?"; tail -6 "$OUT/gds.txt" ;;
    targets)  # `perflab run -t PERFLAB_RUN_TARGETS [PERFLAB_RUN_ARGS]` (examples rather than whole chapters, e.g.
              # "ch13:optimizer ch13:zero_grad"; PERFLAB_RUN_ARGS e.g. "--energy")
      # --suite-timeout ends the suite cleanly before the step's limit: its parent run ends with what finished (status
      # `timeout`; `perflab readme --run-id` takes it), the rest named in run.log
      $T perflab run -t "${PERFLAB_RUN_TARGETS:?set PERFLAB_RUN_TARGETS}" --suite-timeout $((left - 30)) \
        ${PERFLAB_RUN_ARGS:-} >> "$OUT/run.log" 2>&1
      echo "run exit $?"; perflab show --tracking-uri sqlite:///mlflow.db | tee -a "$OUT/show.md" | grep -v "^$" ;;
    sanitize)  # issue 40: PERFLAB_RUN_TARGETS' calls under compute-sanitizer (memcheck, racecheck) at smoke size, the
               # targets dealt round-robin to PERFLAB_SANITIZE_JOBS (default 1) runs side by side (each --no-track: one
               # SQLite store would be written by all); one line per variant: what each tool found
      read -ra tg <<< "${PERFLAB_RUN_TARGETS:?set PERFLAB_RUN_TARGETS}"; jobs=${PERFLAB_SANITIZE_JOBS:-1}
      for ((j = 0; j < jobs && j < ${#tg[@]}; j++)); do
        part=(); for ((i = j; i < ${#tg[@]}; i += jobs)); do part+=("${tg[$i]}"); done
        $T perflab run -t "${part[*]}" --sanitize --smoke --no-track --timeout-multiplier 4 ${PERFLAB_SANITIZE_ARGS:-} \
          --out "$OUT/sanitize/$j" > "$OUT/sanitize_$j.log" 2>&1 &
      done
      wait; echo "sanitize: ${#tg[@]} targets in $jobs runs"
      awk '/^ *[0-9]+\/[0-9]+ +[a-z]+ +ch[0-9]+:/ {if (name != "") print state, name, "no sanitizer result"; name = $3; state = $2}
           match($0, /memcheck|racecheck/) {print state, name, substr($0, RSTART); name = ""}
           END {if (name != "") print state, name, "no sanitizer result"}' "$OUT"/sanitize_*.log | sort -k2 | tee "$OUT/sanitize.txt"
      grep -hE "variants ok|pairs verified|not finished" "$OUT"/sanitize_*.log ;;
    peak)
      $T perflab peak --force > "$OUT/peak.log" 2>&1; echo "peak exit $?"; tail -15 "$OUT/peak.log"
      cp "${PERFLAB_PEAK_CACHE:-$HOME/.cache/perflab/peaks.json}" "$OUT/peaks.json" 2> /dev/null ;;
    report)
      $T perflab report --out "$OUT/report" > "$OUT/report.log" 2>&1; echo "report exit $?"; tail -5 "$OUT/report.log" ;;
    profile)
      $T perflab run -t "${PERFLAB_PROFILE_TARGETS:-7}" --profile --profile-mode all > "$OUT/profile.log" 2>&1
      echo "profile exit $?"; grep -E "bound|ok|failed" "$OUT/profile.log" | tail -20 ;;
    kernels)  # issue 9: check, then time, the Triton kernel cases; CSVs and plots under $OUT/kernels
      $T perflab kernels --case "${PERFLAB_KERNEL_CASES:-all}" --dtype "${PERFLAB_KERNEL_DTYPE:-bf16}" --plot \
        --save-path "$OUT/kernels" ${PERFLAB_KERNEL_ARGS:-} > "$OUT/kernels.log" 2>&1
      echo "kernels exit $?"; grep -E "geomean|target|skipped|failed|^logged|^copy bandwidth" "$OUT/kernels.log" | cut -c1-300 | tail -60 ;;
    wall)  # issue 4: `perflab run -t TARGETS` on one GPU (warm-up), on every GPU (or PERFLAB_WALL_GPUS), on one;
      # whole commands timed, one MLflow store ($OUT/chapter_wall.db)
      $T perflab overhead --n 0 --chapter-wall "${PERFLAB_TARGETS:-7}" ${PERFLAB_WALL_GPUS:+--gpus "$PERFLAB_WALL_GPUS"} --repeats "${PERFLAB_WALL_REPEATS:-1}" \
        --out "$OUT" > "$OUT/wall.log" 2>&1
      echo "wall exit $?"; cat "$OUT/chapter_wall.md" 2> /dev/null || tail -20 "$OUT/wall.log"
      # each run's time line and per-stage sums, read while the artifacts are where the store says
      timeout 120 python3 scripts/timing/wall_tables.py "$OUT" > "$OUT/timelines.txt" 2>&1; tail -12 "$OUT/timelines.txt" ;;
    context)  # issue 4: CUDA start (init, context, first allocation), NVML and exit, one GPU at a time vs all at once
      $T python3 scripts/timing/context_probe.py "${PERFLAB_CONTEXT_ROUNDS:-5}" > "$OUT/context_probe.txt" 2>&1
      echo "context exit $?"; tail -40 "$OUT/context_probe.txt" ;;
    neighbour)  # issue 4: kernel samples on GPU 0 while other processes start and end CUDA on GPU 0 / GPU 1
      $T python3 scripts/timing/neighbour_probe.py "${PERFLAB_NEIGHBOUR_S:-1.5}" "${PERFLAB_NEIGHBOUR_REPS:-3}" \
        > "$OUT/neighbour_probe.txt" 2>&1
      echo "neighbour exit $?"; grep "^|" "$OUT/neighbour_probe.txt" || tail -20 "$OUT/neighbour_probe.txt" ;;
    overhead)
      $T perflab overhead --n "${PERFLAB_OVERHEAD_N:-20}" --fresh-server --out "$OUT" > "$OUT/overhead.log" 2>&1; echo "overhead exit $?"; cat "$OUT/overhead.md" ;;
    sideprobe)  # issue 19: what the side-stream detector sees per kind of call and sample (scripts/timing/side_stream_probe.py)
      $T python3 scripts/timing/side_stream_probe.py "${PERFLAB_SIDEPROBE_N:-40}" > "$OUT/side_stream_probe.md" 2>&1
      echo "sideprobe exit $?"; cat "$OUT/side_stream_probe.md" ;;
    ray)  # issue 25: PERFLAB_TARGETS on one GPU without Ray, then through a local Ray cluster of this host's GPUs
      # (.whl-ray from scripts/ray_wheelhouse.sh, installed here when carried); each whole command timed
      if [ -d .whl-ray ]; then python3 -m pip install -q --no-index --no-deps .whl-ray/*.whl > "$OUT/ray-install.log" 2>&1; fi
      ngpu=$(python3 -c "import torch; print(torch.cuda.device_count())")
      ray start --head --num-gpus "$ngpu" --include-dashboard=false --disable-usage-stats > "$OUT/ray-start.log" 2>&1
      echo "ray start exit $? ($ngpu GPUs)"
      for how in one ray; do
        args=(-t "${PERFLAB_TARGETS:-7}" --tracking-uri "sqlite:///ray-$how.db")
        [ "$how" = ray ] && args+=(--ray auto)
        t0=$(date +%s.%N)
        if [ "$how" = one ]; then CUDA_VISIBLE_DEVICES=0 $T perflab run "${args[@]}" > "$OUT/ray-$how.log" 2>&1
        else $T perflab run "${args[@]}" > "$OUT/ray-$how.log" 2>&1; fi
        echo "$how: exit $? in $(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')") s"
        perflab show --tracking-uri "sqlite:///ray-$how.db" | tee "$OUT/ray-$how.md" | grep -v "^$"; cp "ray-$how.db" "$OUT/"
      done
      ray stop > /dev/null 2>&1 ;;
    coldprobe)  # issue 19: ways to time a cold call beside ncu; batch per-call time by graph length (scripts/timing/cold_probe.py)
      $T python3 scripts/timing/cold_probe.py ${PERFLAB_COLDPROBE_ARGS:-} > "$OUT/cold_probe.md" 2>&1
      echo "coldprobe exit $?"; cat "$OUT/cold_probe.md" ;;
    ringprobe)  # issue 23: ch03 ring_buffer's halves alone, in turn, overlapped, and the overlap's knobs
      $T python3 scripts/timing/ring_probe.py ${PERFLAB_RINGPROBE_ARGS:-} > "$OUT/ring_probe.md" 2>&1
      echo "ringprobe exit $?"; cat "$OUT/ring_probe.md" ;;
    histprobe)  # issue 23: ch06 grid_stride's histogram kernel, its knobs one at a time against the read bandwidth
      $T python3 scripts/timing/histogram_probe.py > "$OUT/histogram_probe.md" 2>&1
      echo "histprobe exit $?"; cat "$OUT/histogram_probe.md" ;;
    expertsprobe)  # issue 23: ch12 multistream_graph's branches alone, together, and their kernels' grids
      $T python3 scripts/timing/experts_probe.py > "$OUT/experts_probe.md" 2>&1
      echo "expertsprobe exit $?"; cat "$OUT/experts_probe.md" ;;
    optprobe)  # issue 24: ch14 compiled_optimizer's step eager, fused and compiled: wall, host, kernels
      $T python3 scripts/timing/optimizer_probe.py > "$OUT/optimizer_probe.md" 2>&1
      echo "optprobe exit $?"; cat "$OUT/optimizer_probe.md" ;;
    kvprobe)  # issue 24: ch19 fp8_kv_cache's decode attention by tile (positions per step, warps, stages)
      $T python3 scripts/timing/kv_attention_probe.py > "$OUT/kv_attention_probe.md" 2>&1
      echo "kvprobe exit $?"; cat "$OUT/kv_attention_probe.md" ;;
    energyprobe)  # the energy counter: its steps, energy per call by window and by way of reading it
      $T python3 scripts/timing/energy_probe.py > "$OUT/energy_probe.md" 2>&1
      echo "energyprobe exit $?"; cat "$OUT/energy_probe.md" ;;
    softcapprobe)  # issue 24: ch14 softcap_attention's kernel by tile and by the cap's tanh
      $T python3 scripts/timing/softcap_probe.py > "$OUT/softcap_probe.md" 2>&1
      echo "softcapprobe exit $?"; cat "$OUT/softcap_probe.md" ;;
    autotuneprobe)  # issue 24: ch14 max_autotune's MLP, the kernels of each compile mode
      $T python3 scripts/timing/autotune_probe.py > "$OUT/autotune_probe.md" 2>&1
      echo "autotuneprobe exit $?"; cat "$OUT/autotune_probe.md" ;;
    cutlass_stage)  # issue 40: keep the carried parts of the CUTLASS DSL bundle (scripts/cutlass_bundle.sh, carry
      # [".cutlass/pN"]) on this machine for a later call while it stays warm (30 s after a call)
      mkdir -p /tmp/cutlass-parts && cp .cutlass/p*/* /tmp/cutlass-parts/ 2> /dev/null
      echo "cutlass parts here: $(cd /tmp/cutlass-parts && ls site.tar.xz.* 2> /dev/null | tr '\n' ' ')" ;;
    cutlass)  # issue 40: the parts joined and checked, unpacked to /tmp/site, the CuTe DSL pairs of chapter 10 run
      # (PERFLAB_CUTLASS_TARGETS); tracked in mlflow.db where MLflow is installed, else --no-track; summary in $OUT/cutlass
      mkdir -p /tmp/cutlass-parts /tmp/site && cp .cutlass/p*/* /tmp/cutlass-parts/ 2> /dev/null
      if [ ! -d /tmp/site/nvidia_cutlass_dsl ]; then
        read -r sum n ver cu < /tmp/cutlass-parts/BUNDLE || { echo "cutlass: no bundle part carried (.cutlass/pN)"; continue; }
        parts=$(ls /tmp/cutlass-parts/site.tar.xz.* | sort -V)
        if [ "$(echo "$parts" | wc -l)" != "$n" ] || [ "$(cat $parts | sha256sum | cut -d' ' -f1)" != "$sum" ]; then
          echo "cutlass: parts here $(echo $parts | xargs -n1 basename | tr '\n' ' ')of $n, or their sha256 differs"; continue
        fi
        cat $parts | xz -d | tar -x -C /tmp/site && echo "cutlass: nvidia-cutlass-dsl $ver ($cu) unpacked"
      fi
      export PYTHONPATH=/tmp/site/nvidia_cutlass_dsl/dsl_packages:/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
      python3 -c "import pydantic" 2> /dev/null \
        || python3 -m pip install -q --no-index --no-deps --target /tmp/site /tmp/site/wheels/*.whl > "$OUT/cutlass-install.log" 2>&1
      python3 -c "import cutlass; print('cutlass DSL', cutlass.__version__)" 2>&1 | tail -1
      track=(--no-track); python3 -c "import mlflow" 2> /dev/null && track=(--tracking-uri sqlite:///mlflow.db)
      # each child imports the DSL and loads its kernel from the DSL's disk cache: 3 rounds (PERFLAB_CUTLASS_ARGS)
      $T python3 -m perflab run -t "${PERFLAB_CUTLASS_TARGETS:-ch10:cute_tma_pipeline,ch10:cute_wgmma_async,ch10:cute_wgmma_tile}" \
        "${track[@]}" --suite-timeout $((left - 30)) --out "$OUT/cutlass" ${PERFLAB_CUTLASS_ARGS:---rounds 3} > "$OUT/cutlass.log" 2>&1
      echo "cutlass run exit $?"; grep -v "━" "$OUT/cutlass.log" | tail -30 ;;
    tilesprobe)  # issue 23: ch10's per-tile vs persistent and pointer vs TMA matmuls by problem (K, dtype)
      $T python3 scripts/timing/tiles_probe.py > "$OUT/tiles_probe.md" 2>&1
      echo "tilesprobe exit $?"; cat "$OUT/tiles_probe.md" ;;
    flexprobe)  # issue 24: ch18 sliding_window's FlexAttention kernel by kernel options and max-autotune
      $T python3 scripts/timing/flex_probe.py > "$OUT/flex_probe.md" 2>&1
      echo "flexprobe exit $?"; cat "$OUT/flex_probe.md" ;;
    genprobe)  # issue 24: TTFT/TPOT as perflab reports them against a plain per-step CUDA-event loop
      for f in ${PERFLAB_GENPROBE_FILES:-chapters/ch15/baseline_kv_cache.py chapters/ch15/optimized_kv_cache.py}; do
        # PERFLAB_GENPROBE_ARGS: e.g. "--variance 5" (GC conditions) or "--drift 90" (host and GPU references) instead
        $T python3 scripts/timing/generation_probe.py "$f" --generations 5 ${PERFLAB_GENPROBE_ARGS:-} \
          >> "$OUT/generation_probe.md" 2>&1
        echo "genprobe $f exit $?"
      done; grep "^|" "$OUT/generation_probe.md" ;;
    exploits)  # the exploit catalog in both output styles, the styles matrix, perflab ab, the clock tests on the GPU
      $T python3 -m pytest -q -p no:cacheprovider -rA tests/bench/test_exploits.py tests/bench/isolate/test_styles.py \
        tests/bench/cli/test_ab.py tests/bench/measure/test_clocks.py tests/bench/measure/test_streams.py \
        tests/bench/measure/test_memory.py > "$OUT/exploits.log" 2>&1
      echo "exploits exit $?"; grep -E "passed|failed|FAILED|Error" "$OUT/exploits.log" | tail -20 ;;
    ab)  # `perflab ab` on chapter 20's KernelBench-format problems (PERFLAB_AB_PATHS: other files or directories)
      $T perflab ab ${PERFLAB_AB_PATHS:-chapters/ch20/kernelbench} ${PERFLAB_AB_ARGS:-} > "$OUT/ab.log" 2>&1
      echo "ab exit $?"; grep -v "━" "$OUT/ab.log" | tail -40 ;;
    aa)  # issue 19: A/A pairs (each baseline against a copy of itself): how often the 95 % interval holds 1.0
      $T python3 scripts/aa_pairs.py ${PERFLAB_AA_TARGETS:-7 1} --repeats "${PERFLAB_AA_REPEATS:-2}" --out "$OUT" \
        > "$OUT/aa.md" 2>&1
      echo "aa exit $?"; tail -3 "$OUT/aa.md" ;;
    book)  # issue 42: chapters PERFLAB_BOOK_CHAPTERS (default 13-20), one `perflab run --no-track --out` each, the time
           # left shared among the chapters still to run (--suite-timeout: a chapter cut short keeps what finished and
           # names the rest); a row per chapter: wall, variants, elapsed per variant, rounds, the stage split
      chapters=(${PERFLAB_BOOK_CHAPTERS:-13 14 15 16 17 18 19 20}); : > "$OUT/book_walls.txt"
      for i in "${!chapters[@]}"; do
        ch=${chapters[$i]}; left=$((budget - SECONDS - 25)); share=$((left / (${#chapters[@]} - i)))
        # PERFLAB_BOOK_SPLIT=order: each chapter may take all the time left (whole chapters first; the last cut short)
        if [ "${PERFLAB_BOOK_SPLIT:-equal}" = order ]; then share=$left; fi
        if [ "$share" -lt 20 ]; then echo "book ch$ch skipped: ${left}s left"; continue; fi
        s0=$SECONDS
        timeout $((share + 20)) perflab run -t "ch$ch" --no-track --suite-timeout "$share" ${PERFLAB_BOOK_ARGS:-} \
          --out "$OUT/book/ch$ch" > "$OUT/book_ch$ch.log" 2>&1
        rc=$?; echo "ch$ch $((SECONDS - s0)) $rc" >> "$OUT/book_walls.txt"
      done
      timeout 20 python3 scripts/timing/book_table.py "$OUT/book" "$OUT/book_walls.txt" | tee "$OUT/book.md"
      # the host-speed readings against the rounds (and, for generations, the readings after each generation)
      timeout 60 python3 scripts/timing/host_rounds.py "$OUT/book" > "$OUT/host_rounds.md" 2>&1
      grep -A 30 "^| reading" "$OUT/host_rounds.md" | grep "1.3×"; grep "median rank correlation" "$OUT/host_rounds.md"
      # PERFLAB_BOOK_REFERENCE: MLflow stores of a run with the earlier settings (e.g. docs/results/h200-2026-11-26/
      # call*/*.db.xz): each pair in both, the same verdict? an interval within 1.5x the reference's width?
      if [ -n "${PERFLAB_BOOK_REFERENCE:-}" ]; then
        timeout 60 python3 scripts/timing/book_compare.py "$OUT/book" $PERFLAB_BOOK_REFERENCE > "$OUT/book_compare.md"
        echo "book_compare exit $?"; tail -1 "$OUT/book_compare.md"
      fi ;;
    warmcache)  # issue 42: chapter 14 twice from empty compile caches (a private XDG_CACHE_HOME): wall and medians;
      # with PERFLAB_CACHE_THREADS1=1 a third run, warm, with one Inductor compile thread (no worker pool started in
      # each compiled child: 16 workers on the H200 host's cores, which a warm cache never uses)
      ( export XDG_CACHE_HOME="$OUT/xdg-cache"; mkdir -p "$XDG_CACHE_HOME"
        for n in 1 2 ${PERFLAB_CACHE_THREADS1:+3}; do
          s0=$SECONDS
          ( [ "$n" = 3 ] && export TORCHINDUCTOR_COMPILE_THREADS=1
            $T python3 -m perflab run -t "${PERFLAB_CACHE_TARGETS:-ch14}" --no-track > "$OUT/warmcache_$n.md" 2>&1 )
          echo "warmcache run $n exit $? wall $((SECONDS - s0)) s"
        done )
      grep -hE "variants|faster|slower|difference|wall|stages" "$OUT"/warmcache_[123].md | tail -60 ;;
    sweep)  # issue 5: the default grid (128 trials), smart replayed against it, then a live smart sweep of 32
      # Storage and tables under $OUT (optuna.db beside mlflow.db would not come back); --time-budget stops
      # starting trials in time for the summary; the same --storage/--study-name resumes in a later call.
      mkdir -p "$OUT/sweep"
      $T perflab sweep run --config sweeps/default.yaml --strategy grid --storage "sqlite:///$OUT/sweep/optuna.db" \
        --study-name grid --out "$OUT/sweep" --time-budget $((left > 150 ? left - 90 : 60)) --trial-timeout 60 ${PERFLAB_SWEEP_ARGS:-} \
        > "$OUT/sweep.log" 2>&1
      echo "sweep exit $?"; grep -E "^(sweep:|trial server)|^_measurement|^\*\*" "$OUT/sweep.log"
      timeout 60 perflab sweep replay "$OUT/sweep/results.csv" --seeds 10 --out "$OUT/sweep" > "$OUT/replay.log" 2>&1
      echo "replay exit $?"; grep -E "^\*\*|^- grid" "$OUT/replay.log" || tail -3 "$OUT/replay.log"
      left=$((budget - SECONDS))
      if [ "$left" -gt 90 ]; then
        timeout "$left" perflab sweep run --config sweeps/default.yaml --strategy smart --n-trials 32 \
          --storage "sqlite:///$OUT/sweep/optuna.db" --study-name smart --out "$OUT/sweep-smart" \
          --time-budget $((left - 45)) --trial-timeout 60 ${PERFLAB_SWEEP_ARGS:-} > "$OUT/sweep-smart.log" 2>&1
        echo "smart sweep exit $?"; grep -E "^sweep:|^\*\*highest" "$OUT/sweep-smart.log"
      fi ;;
    sweep_builtins)  # issue 22: each GPU built-in, smart search, recommendation verified against the seed's default
      # (batch 32, 0 workers, fp32), 5 fresh runs each. Storage and tables under $OUT; ~3.5 min per workload.
      wls=(${PERFLAB_SWEEP_WORKLOADS:-cnn gpt}); n=${#wls[@]}
      for wl in "${wls[@]}"; do
        left=$((budget - SECONDS)); share=$((left / n)); n=$((n - 1))
        if [ "$share" -lt 90 ]; then echo "sweep $wl skipped: ${left}s left"; continue; fi
        mkdir -p "$OUT/sweep-$wl"
        # trials start within 45 % of the share; the rest: data (once), server, verification (10 runs), tables
        timeout "$share" perflab sweep run --workload "$wl" --strategy smart --n-trials "${PERFLAB_SWEEP_TRIALS:-16}" \
          --storage "sqlite:///$OUT/sweep-$wl/optuna.db" --study-name "$wl" --out "$OUT/sweep-$wl" \
          --time-budget $((share * 45 / 100)) --trial-timeout 90 --verify-repeats 5 ${PERFLAB_SWEEP_ARGS:-} \
          > "$OUT/sweep-$wl.log" 2>&1
        echo "sweep $wl exit $?"
        grep -E "^(sweep:|trial server|verify|no --data|  written)|^_measurement|^\*\*" "$OUT/sweep-$wl.log" | grep -v "^verify .* repeat" | cut -c1-400
      done ;;
    sweep_user)  # issue 39: users' jobs (tests/sweeps/fixtures/): recommendation, ranking, bottleneck, verification
      # against the plain default. PERFLAB_USER_JOBS (default "h5_classifier"): fixtures, each "NAME[:SWEEPS]";
      # h5_classifier: ResNet-18 on 6,000 3x128x128 uint8 images in HDF5, read one per item, normalised on the host;
      # jpeg_folder: a small CNN on 6,000 JPEG/PNG files, decoded, cropped and flipped on the host;
      # token_stream: a tiny transformer on np.memmap token windows from an IterableDataset.
      # SWEEPS (comma-separated; default PERFLAB_USER_SWEEPS, default "a"): one smart sweep per name, each its own
      # study ("a,b": the same job twice, then one line with both recommendations' re-measured throughputs and
      # their ratio); "pair": two workers started together on one study (one GPU each on a 2-GPU host), then
      # whether they concluded the same. E.g. PERFLAB_USER_JOBS="h5_classifier:a,b jpeg_folder:a h5_classifier:pair"
      mkdir -p "$OUT/sweep-user"
      for spec in ${PERFLAB_USER_JOBS:-h5_classifier}; do
        fx=${spec%%:*}; names=${spec#"$fx"}; names=${names#:}; names=${names:-${PERFLAB_USER_SWEEPS:-a}}
        case $fx in
          h5_classifier) data="$OUT/sweep-user/images.h5"; make=(--samples 6000 --side 128) ;;
          jpeg_folder) data="$OUT/sweep-user/jpeg"; make=(--samples 6000 --side 144) ;;
          token_stream) data="$OUT/sweep-user/train.bin"; make=(--samples 20000) ;;
          *) echo "sweep_user: no fixture $fx (h5_classifier, jpeg_folder, token_stream)"; continue ;;
        esac
        # PERFLAB_USER_DATA_ARGS: replaces the data's size (e.g. "--samples 96 --side 40" for a CPU dry run)
        [ -e "$data" ] || $T python3 "tests/sweeps/fixtures/$fx.py" "$data" "${make[@]}" ${PERFLAB_USER_DATA_ARGS:-}
        job="tests/sweeps/fixtures/$fx.py:make"; ran=()
        for name in ${names//,/ }; do
          left=$((budget - SECONDS)); if [ "$left" -lt 120 ]; then echo "sweep_user $fx $name skipped: ${left}s left"; continue; fi
          common=(--workload "$job" --data-path "$data" --strategy smart --n-trials "${PERFLAB_SWEEP_TRIALS:-10}"
                  --storage "sqlite:///$OUT/sweep-user/optuna.db" --trial-timeout 90 --verify-repeats 5 --no-track)
          if [ "$name" = pair ]; then
            gpus=$(nvidia-smi -L | wc -l)
            for i in 0 1; do
              CUDA_VISIBLE_DEVICES=$((gpus > 1 ? i : 0)) timeout "$((left - 20))" perflab sweep run "${common[@]}" \
                --study-name "user-$fx-pair" --out "$OUT/sweep-user-$fx-pair-$i" ${PERFLAB_SWEEP_ARGS:-} > "$OUT/sweep-user-$fx-pair-$i.log" 2>&1 &
            done; wait
            for i in 0 1; do echo "$fx pair worker $i:"; grep -E "^\*\*(recommended|speedup)|concludes this study" "$OUT/sweep-user-$fx-pair-$i.log" | cut -c1-300; done
            python3 scripts/sweep_compare.py "$OUT/sweep-user-$fx-pair-0" "$OUT/sweep-user-$fx-pair-1" --same --label "$fx pair"
          else
            timeout "$((left - 20))" perflab sweep run "${common[@]}" --study-name "user-$fx-$name" --out "$OUT/sweep-user-$fx-$name" \
              ${PERFLAB_SWEEP_ARGS:-} > "$OUT/sweep-user-$fx-$name.log" 2>&1
            echo "sweep_user $fx $name exit $?"; ran+=("$OUT/sweep-user-$fx-$name")
            grep -E "^(sweep:|\*\*|\| 1 \|)|^_(Order|Not decided)" "$OUT/sweep-user-$fx-$name/recommendation.md" | cut -c1-400
          fi
        done
        if [ "${#ran[@]}" -ge 2 ]; then python3 scripts/sweep_compare.py "${ran[0]}" "${ran[1]}" --label "$fx swept twice"; fi
      done ;;
    stops)  # a suite and a sweep stopped by SIGTERM mid-way: what they logged, and nothing left on the GPU
      timeout -s TERM "${PERFLAB_STOP_RUN_S:-20}" perflab run -t "${PERFLAB_TARGETS:-7}" > "$OUT/stop-run.log" 2>&1
      echo "run exit $?"; tail -2 "$OUT/stop-run.log"
      timeout -s TERM "${PERFLAB_STOP_SWEEP_S:-60}" perflab sweep run --workload cnn --strategy smart --n-trials 8 \
        --verify-repeats 0 --storage "sqlite:///$OUT/stop-optuna.db" --study-name stopped > "$OUT/stop-sweep.log" 2>&1
      echo "sweep exit $?"; grep -E "^(trial [0-9]|interrupted)" "$OUT/stop-sweep.log" | cut -c1-200
      sleep 10  # a trial's DataLoader workers notice their parent's end within 5 s
      echo "GPU processes left:"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
      echo "processes left:"; pgrep -af "forkserver|pt_data_worker|perflab (run|sweep)" | cut -c1-120
      python3 - <<'PY'
import sqlite3
query = """select r.name, r.status, t.value from runs r left join tags t on t.run_uuid = r.run_uuid
           and t.key = 'perflab.suite_status' where r.name not like '%:%:%' and r.name not like 'trial %'"""
for row in sqlite3.connect("mlflow.db").execute(query):
    print(*row)
PY
      ;;
    sweep_grid)  # issue 22: the cnn grid (sweeps/cnn-grid.yaml, 64 configurations), then smart replayed against it
      mkdir -p "$OUT/sweep-grid"
      $T perflab sweep run --config sweeps/cnn-grid.yaml --strategy grid --storage "sqlite:///$OUT/sweep-grid/optuna.db" \
        --study-name cnn-grid --out "$OUT/sweep-grid" --time-budget $((left > 150 ? left - 60 : 60)) \
        ${PERFLAB_SWEEP_ARGS:-} > "$OUT/sweep-grid.log" 2>&1
      echo "grid exit $?"; grep -E "^(sweep:|trial server|time budget)|^_measurement|^\*\*" "$OUT/sweep-grid.log" | cut -c1-400
      timeout 60 perflab sweep replay "$OUT/sweep-grid/results.csv" --seeds 10 --target-frac 0.15 --out "$OUT/sweep-grid" \
        > "$OUT/replay.log" 2>&1
      echo "replay exit $?"; grep -E "^\*\*|^- grid" "$OUT/replay.log" || tail -3 "$OUT/replay.log" ;;
  esac
done
perflab server stop > /dev/null 2>&1  # the pre-warmed servers outlive commands: not this call
# The device returns a limited number of files: everything goes into one bundle (logs, tables, raw ncu
# CSV, report, MLflow artifacts), beside mlflow.db and machine.txt.
repo=$(pwd)
# PERFLAB_BUNDLE_EXCLUDE: a tar pattern left out of the bundle (e.g. "trace.json.gz": torch traces, a few MB each)
bundle() {
  tar czf /tmp/perflab-bundle.tgz ${PERFLAB_BUNDLE_EXCLUDE:+--exclude="$PERFLAB_BUNDLE_EXCLUDE"} "$@" -C "$OUT" . \
    -C "$repo" mlruns 2> /dev/null
}
bundle
# A file comes back only up to 16 MiB (8 files, 64 MiB in all): a larger bundle comes in 15 MiB parts
# (bundle.tgz.0, .1, ...: `cat bundle.tgz.* | tar xz`), and one over four parts leaves out its files over 4 MiB, named.
size=$(stat -c %s /tmp/perflab-bundle.tgz)
[ "$size" -gt $((15 * 1048576)) ] && { echo "largest files:"; find "$OUT" -type f -printf '  %s %P\n' | sort -n | tail -5; }
if [ "$size" -gt $((60 * 1048576)) ]; then
  (cd "$OUT" && find . -type f -size +4M) > /tmp/perflab-big.txt
  echo "bundle of $((size / 1048576)) MiB: left out, files over 4 MiB:"; sed 's/^/  /' /tmp/perflab-big.txt
  bundle --exclude-from=/tmp/perflab-big.txt
  size=$(stat -c %s /tmp/perflab-bundle.tgz)
fi
find "$OUT" -mindepth 1 ! -name machine.txt -delete
if [ "$size" -gt $((15 * 1048576)) ]; then
  split -b 15M -d -a 1 /tmp/perflab-bundle.tgz "$OUT/bundle.tgz." && rm /tmp/perflab-bundle.tgz
  echo "bundle of $((size / 1048576)) MiB in parts: cat bundle.tgz.* | tar xz"
else
  mv /tmp/perflab-bundle.tgz "$OUT/bundle.tgz"
fi
cp mlflow.db "$OUT/" 2> /dev/null
echo done
