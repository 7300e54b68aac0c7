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
