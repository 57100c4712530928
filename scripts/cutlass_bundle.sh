#!/usr/bin/env bash
# Pack NVIDIA's CUTLASS Python DSL (nvidia-cutlass-dsl) for the offline GPU host, in parts that each fit
# beside the tracked tree in one device call (64 MiB a call, the tracked files ~20 MB).
#   scripts/cutlass_bundle.sh            -> .cutlass/p0/, .cutlass/p1/, ... (ignored through .git/info/exclude)
#   CUTLASS_DSL_VERSION (default 4.8.1), CUTLASS_DSL_CUDA (cu13 or cu12; default cu13),
#   CUTLASS_PART_MB (default 40: the most one part holds, in MiB), CUTLASS_XZ (default "-6 -T0"; -9e gained nothing on
#   8 MiB samples of the big library and takes ~10x the time)
# What is packed: the four DSL wheels for CPython 3.12 x86-64 unpacked (the GPU image has their
# dependencies: cuda-bindings, protobuf, typing-extensions), less what a JIT-compiled kernel never loads
# (the experimental iket profiler, the aarch64 stubs, the C header and static library for AOT export),
# the .so files put through `strip --strip-unneeded`, then tar | xz; plus the pydantic wheels that
# `python3 -m perflab run --no-track` needs where the usual wheelhouse (.whl) is not installed.
# The GPU side (scripts/gpu_session.sh steps cutlass_stage and cutlass) joins the parts, checks their
# sha256 and unpacks them to /tmp/site.
set -euo pipefail
cd "$(dirname "$0")/.."
ver=${CUTLASS_DSL_VERSION:-4.8.1}
cu=${CUTLASS_DSL_CUDA:-cu13}
part_mb=${CUTLASS_PART_MB:-40}
case $cu in cu12|cu13) ;; *) echo "CUTLASS_DSL_CUDA=$cu: cu12 or cu13 are accepted" >&2; exit 2 ;; esac
case $part_mb in ''|*[!0-9]*) echo "CUTLASS_PART_MB=$part_mb: a whole number of MiB is accepted" >&2; exit 2 ;; esac
exclude=$(git rev-parse --git-path info/exclude)
grep -qx '/.cutlass/' "$exclude" 2> /dev/null || echo '/.cutlass/' >> "$exclude"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mb() { python3 -c "import sys; print(f'{int(sys.argv[1]) / 1e6:.1f} MB')" "$1"; }

pip_get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$1" "${@:2}" 2>&1 | { grep -v "^WARNING: Location" || true; }
}
pip_get "$work/dsl" "nvidia-cutlass-dsl==$ver" "nvidia-cutlass-dsl-libs-base==$ver" \
  "nvidia-cutlass-dsl-libs-core==$ver" "nvidia-cutlass-dsl-libs-$cu==$ver"
pip_get "$work/site/wheels" pydantic pydantic-core annotated-types typing-inspection
for w in "$work"/dsl/*.whl; do echo "wheel $(basename "$w"): $(mb "$(stat -c %s "$w")")"; done

site=$work/site
for w in "$work"/dsl/*.whl; do python3 -m zipfile -e "$w" "$site"; done
before=$(du -sb "$site" | cut -f1)
root=$site/nvidia_cutlass_dsl
rm -rf "$root/dsl_packages/iket" "$root/$cu/lib/stubs" "$root/$cu/include" "$site/bin"
find "$site" \( -name '*.a' -o -name '__pycache__' \) -prune -exec rm -rf {} +
find "$site" -name '*.so*' -type f -exec strip --strip-unneeded {} +
after=$(du -sb "$site" | cut -f1)
echo "unpacked $(mb "$before"); less the unused files and stripped $(mb "$after")"
find "$site" -name '*.so*' -type f -printf '%s %P\n' | sort -rn | head -3 \
  | while read -r size path; do echo "  $(mb "$size")  $path"; done

# shellcheck disable=SC2086
tar -C "$site" -cf - . | xz ${CUTLASS_XZ:--6 -T0} > "$work/site.tar.xz"
total=$(stat -c %s "$work/site.tar.xz")
rm -rf .cutlass && mkdir -p .cutlass
split -b "${part_mb}M" -d -a 1 "$work/site.tar.xz" "$work/part."
n=$(find "$work" -maxdepth 1 -name 'part.*' | wc -l)
for f in "$work"/part.*; do
  i=${f##*.}; i=$((10#$i)); mkdir -p ".cutlass/p$i"; mv "$f" ".cutlass/p$i/site.tar.xz.$i"
done
sum=$(sha256sum "$work/site.tar.xz" | cut -d' ' -f1)
for d in .cutlass/p*; do printf '%s %s %s %s\n' "$sum" "$n" "$ver" "$cu" > "$d/BUNDLE"; done
echo "xz $(mb "$total") in $n part(s) of at most $part_mb MiB (nvidia-cutlass-dsl $ver, $cu):"
du -b .cutlass/p* | while read -r size d; do echo "  $d $(mb "$size")"; done
echo "one device call carries one part beside the tracked tree (64 MiB a call):"
echo "  carry [\".cutlass/p0\"] PERFLAB_STEPS=cutlass_stage; ...; the last part with PERFLAB_STEPS=cutlass"
