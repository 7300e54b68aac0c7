# Sourced by the check_exp_*.sh scripts and check_experiments.sh (run from the repository's root).
# copy_variant ROOT NAME PATCH LOG: the working tree, without build folders and .git, into
# ROOT/NAME; unless NAME is main, every docs/pending/common_*.patch (the device vocabulary the
# experiments share) and then PATCH applied there, patch's output appended to LOG. Returns 1,
# naming the patch, when one does not apply.
copy_variant() {
  local root=$1 name=$2 patch_file=$3 log=$4 p
  mkdir -p "$root/$name"
  tar --exclude='./build*' --exclude='./.git' -cf - . | tar -xf - -C "$root/$name"
  [[ $name == main ]] && return 0
  for p in docs/pending/common_*.patch "$patch_file"; do
    [[ -e $p ]] || continue  # no common_*.patch: the glob stays as written
    (cd "$root/$name" && patch -p1 --fuzz=0 <"$OLDPWD/$p" >>"$log" 2>&1) || { echo "FAILED to apply $p"; return 1; }
  done
  [[ -e $patch_file ]] || { echo "no such patch: $patch_file"; return 1; }
}

# experiment_setup OUTDIR: what every experiment script needs before its first step: OUTDIR made,
# step (a timestamped line on stdout and in OUTDIR/steps.log), CUDA's bin on PATH, and gen, the
# CMake generator flags (Ninja where it is installed).
experiment_setup() {
  mkdir -p "$1"
  step() { echo "== $(date +%T) $*" | tee -a "$out/steps.log"; }
  [[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  return 0
}

# experiment_stages DEFAULT: the stages to run, STAGES or else DEFAULT (comma-separated; `want NAME`
# says whether NAME is one of them), and root, the folder of the copies and builds: ROOT, so that
# a later call on the same warm machine can reuse them, or else a new temporary folder.
experiment_stages() {
  stages=",${STAGES:-$1},"
  want() { [[ $stages == *",$1,"* ]]; }
  root=${ROOT:-$(mktemp -d)}
  mkdir -p "$root"
}

# build_variants PREFIX TARGET...: every name in variants (main first) copied into root/NAME with
# docs/pending/PREFIX_NAME.patch applied (copy_variant), then configured and built there, all in
# parallel with the cores split between them: the TARGETs, and for every variant but main the
# targets in the array extra_targets too. Logs in OUTDIR; a failed build prints BUILD FAILED.
# Returns 1 when a patch does not apply.
build_variants() {
  local prefix=$1 v jobs
  shift
  jobs=$(($(nproc) / ${#variants[@]}))
  ((jobs < 2)) && jobs=2
  for v in "${variants[@]}"; do
    copy_variant "$root" "$v" "docs/pending/${prefix}_$v.patch" "$out/patch.log" || return 1
    local targets=("$@")
    [[ $v != main ]] && targets+=("${extra_targets[@]}")
    (cmake -S "$root/$v" -B "$root/$v/build" -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$out/configure_$v.log" 2>&1 &&
      cmake --build "$root/$v/build" -j "$jobs" --target "${targets[@]}" >"$out/build_$v.log" 2>&1 ||
      echo "BUILD FAILED: $v (build_$v.log)") &
  done
  wait
}

# sanitize EXE NAME ARGS...: compute-sanitizer memcheck and racecheck of EXE on each ARGS string (a
# problem's flags; --iters 1), the logs appended to OUTDIR/san_NAME_TOOL.log, one line with the
# exit status per run (99: the tool found an error).
sanitize() {
  local exe=$1 name=$2 tool args
  shift 2
  for tool in memcheck racecheck; do
    for args in "$@"; do
      # shellcheck disable=SC2086  # args is a list of flags
      compute-sanitizer --tool "$tool" --error-exitcode 99 "$exe" $args --iters 1 >>"$out/san_${name}_$tool.log" 2>&1
      echo "$name $tool $args: rc=$?"
    done
  done
}
