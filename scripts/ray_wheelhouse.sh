#!/usr/bin/env bash
# Ray for the offline GPU host, within the device's 64 MiB carry: ./.whl-ray/ (git-ignored) holds Ray's wheel
# for the host's Python 3.12 without the parts a `perflab run --ray` cluster never loads (Java workers'
# jar, the dashboard's web client, RLlib, Data, Serve, Tune, Train, LLM: 37 of its 75 MB), and the
# dependencies the GPU image lacks. Carry it in a
# call of its own (the device keeps an install from an earlier call on the same machine), or with a
# smaller .whl; scripts/gpu_session.sh's `ray` step installs it when present.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && git init -q && bash "$root/../shared/gpu-wheelhouse.sh" ray > /dev/null)
rm -rf "$root/.whl-ray"; mkdir -p "$root/.whl-ray"
grep -qx '/.whl-ray/' "$root/.git/info/exclude" 2>/dev/null || echo '/.whl-ray/' >> "$root/.git/info/exclude"
for w in "$tmp"/.whl/*.whl; do
  case $(basename "$w") in
    ray-*) python3 - "$w" "$root/.whl-ray/$(basename "$w")" <<'PY'
import sys, zipfile
src, dst = sys.argv[1:]
drop = ("ray/jars/", "ray/dashboard/client/build/", "ray/rllib/", "ray/data/", "ray/serve/", "ray/tune/", "ray/train/",
        "ray/llm/")
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
    for item in zin.infolist():
        if item.filename.startswith(drop):
            continue
        data = zin.read(item)
        if item.filename.endswith(".dist-info/RECORD"):
            data = b"".join(l + b"\n" for l in data.splitlines() if not l.decode().startswith(drop))
        zout.writestr(item, data)
PY
    ;;
    *) cp "$w" "$root/.whl-ray/" ;;
  esac
done
du -sh "$root/.whl-ray"
